#include "verifier/check/chunk_coverage.h"

#include <algorithm>

#include "formats/tensor_file.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {

namespace {

// Enough to locate a problem without flooding the report when a manifest is badly broken.
constexpr size_t kMaxOverlapsReported = 8;

struct Box {
  DimsView offsets;
  DimsView shape;
  size_t chunk;  // index in ManifestTensor::chunks, for messages
};

std::string box_label(const std::string& name, const Box& b) {
  std::string s = name + "[";
  for (size_t d = 0; d < b.shape.size(); ++d) {
    if (d) s += ", ";
    s += std::to_string(b.offsets[d]) + ":" + std::to_string(b.offsets[d] + b.shape[d]);
  }
  return s + "]";
}

bool boxes_intersect(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t a0 = a.offsets[d], a1 = a0 + a.shape[d];
    const int64_t b0 = b.offsets[d], b1 = b0 + b.shape[d];
    if (a1 <= b0 || b1 <= a0) return false;
  }
  return true;  // rank 0: both boxes are the one element
}

// For row splits (every box spans dims 1..), names the first uncovered row range; else "".
std::string first_row_gap(const ManifestTensor& t, const std::vector<Box>& sorted) {
  if (t.shape.empty()) return "";
  for (const Box& b : sorted) {
    for (size_t d = 1; d < t.shape.size(); ++d) {
      if (b.shape[d] != t.shape[d]) return "";
    }
  }
  int64_t next = 0;
  for (const Box& b : sorted) {
    if (b.offsets[0] > next) break;
    next = std::max(next, b.offsets[0] + b.shape[0]);
  }
  const int64_t end = std::min<int64_t>(t.shape[0], [&] {
    for (const Box& b : sorted) {
      if (b.offsets[0] > next) return b.offsets[0];
    }
    return t.shape[0];
  }());
  return "; rows " + std::to_string(next) + ":" + std::to_string(end) + " are in no chunk";
}

}  // namespace

void check_chunk_coverage(const ManifestTensor& t, VerifyReport& report) {
  const int64_t numel = checked_numel(t.shape).value_or(0);  // the manifest parser bounds the shape
  std::vector<Box> boxes;
  bool out_of_bounds = false;
  for (size_t i = 0; i < t.chunks.size(); ++i) {
    const ManifestChunk& c = t.chunks[i];
    if (!chunk_lies_inside(t.shape, c.offsets, c.shape)) {
      out_of_bounds = true;
      report.add_error(verify_code::kChunkOutOfBounds, "", t.name,
                       "chunk " + std::to_string(i) + " at offsets " + shape_to_string(c.offsets) +
                           " with shape " + shape_to_string(c.shape) + " does not fit in " +
                           shape_to_string(t.shape));
      continue;
    }
    if (checked_numel(c.shape).value_or(0) > 0) boxes.push_back({c.offsets, c.shape, i});
  }
  std::sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) { return a.offsets < b.offsets; });

  size_t overlaps = 0;
  for (size_t i = 0; i < boxes.size() && overlaps < kMaxOverlapsReported; ++i) {
    const int64_t end0 = t.shape.empty() ? 1 : boxes[i].offsets[0] + boxes[i].shape[0];
    for (size_t j = i + 1; j < boxes.size() && overlaps < kMaxOverlapsReported; ++j) {
      // Sorted by dim-0 offset: once a box starts at or after this one's end, none later overlaps it.
      if (!t.shape.empty() && boxes[j].offsets[0] >= end0) break;
      if (boxes_intersect(boxes[i], boxes[j])) {
        ++overlaps;
        report.add_error(verify_code::kCoverageOverlap, "", t.name,
                         "chunks " + box_label(t.name, boxes[i]) + " and " + box_label(t.name, boxes[j]) +
                             " cover the same elements");
      }
    }
  }
  if (overlaps) return;
  int64_t covered = 0;
  for (const Box& b : boxes) covered += checked_numel(b.shape).value_or(0);  // no overlap: sum <= numel
  if (covered < numel) {
    report.add_error(verify_code::kCoverageGap, "", t.name,
                     "chunks cover " + std::to_string(covered) + " of " + std::to_string(numel) +
                         " elements" + (out_of_bounds ? "" : first_row_gap(t, boxes)));
  }
}

}  // namespace ckpt
