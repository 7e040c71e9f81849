#include "shards/reshard_plan.h"

#include <algorithm>

namespace ckpt {

namespace {

// Bytes of one row (everything below dim 0); a scalar is one row of one element.
Result<uint64_t> row_bytes_of(const ManifestTensor& t) {
  std::vector<int64_t> row_shape;
  if (t.shape.size() > 1) row_shape.assign(t.shape.begin() + 1, t.shape.end());
  auto n = checked_nbytes(row_shape, t.dtype);
  if (!n) return Status::corruption(t.name + ": shape " + shape_to_string(t.shape) + " overflows");
  return *n;
}

Status check_row_box(const ManifestTensor& t, const ManifestChunk& c) {
  const bool ranks_match = c.offsets.size() == t.shape.size() && c.shape.size() == t.shape.size();
  bool box = ranks_match;
  for (size_t d = 1; box && d < t.shape.size(); ++d) box = c.offsets[d] == 0 && c.shape[d] == t.shape[d];
  if (box && !t.shape.empty())
    box = c.offsets[0] >= 0 && c.shape[0] >= 0 && c.offsets[0] + c.shape[0] <= t.shape[0];
  if (!box) {
    return Status::corruption(t.name + ": chunk at offsets " + shape_to_string(c.offsets) + " shape " +
                              shape_to_string(c.shape) + " is not a row range of " +
                              shape_to_string(t.shape) + "; resharding reads row ranges only");
  }
  return Status::ok();
}

}  // namespace

Result<RowReadPlan> plan_row_reads(const ManifestTensor& t, int64_t row_begin, int64_t row_end) {
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  if (row_begin < 0 || row_end < row_begin || row_end > rows) {
    return Status::invalid_argument(t.name + ": rows [" + std::to_string(row_begin) + ", " +
                                    std::to_string(row_end) + ") outside [0, " + std::to_string(rows) + ")");
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t row_bytes, row_bytes_of(t));
  RowReadPlan plan;
  plan.target_bytes = static_cast<uint64_t>(row_end - row_begin) * row_bytes;
  for (size_t i = 0; i < t.chunks.size(); ++i) {
    const ManifestChunk& c = t.chunks[i];
    CKPT_RETURN_IF_ERROR(check_row_box(t, c));
    const int64_t c_begin = t.shape.empty() ? 0 : c.offsets[0];
    const int64_t c_end = t.shape.empty() ? 1 : c.offsets[0] + c.shape[0];
    const int64_t lo = std::max(c_begin, row_begin), hi = std::min(c_end, row_end);
    if (lo >= hi) continue;
    ChunkRead r;
    r.chunk = i;
    r.chunk_offset = static_cast<uint64_t>(lo - c_begin) * row_bytes;
    r.length = static_cast<uint64_t>(hi - lo) * row_bytes;
    r.target_offset = static_cast<uint64_t>(lo - row_begin) * row_bytes;
    r.whole_chunk = lo == c_begin && hi == c_end;
    plan.reads.push_back(r);
  }
  std::sort(plan.reads.begin(), plan.reads.end(),
            [](const ChunkRead& a, const ChunkRead& b) { return a.target_offset < b.target_offset; });
  uint64_t covered = 0;
  for (const ChunkRead& r : plan.reads) {
    if (r.target_offset != covered) {
      return Status::corruption(t.name + ": rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_end) + ") " +
                                (r.target_offset < covered ? "overlap" : "have a gap") + " at byte " +
                                std::to_string(covered) + " of the target");
    }
    covered += r.length;
  }
  if (covered != plan.target_bytes) {
    return Status::corruption(t.name + ": chunks cover " + std::to_string(covered) + " of " +
                              std::to_string(plan.target_bytes) + " bytes of rows [" +
                              std::to_string(row_begin) + ", " + std::to_string(row_end) + ")");
  }
  return plan;
}

}  // namespace ckpt
