#include "verifier/tensors/checkpoint_diff.h"

#include <cstring>
#include <set>
#include <vector>

#include "base/parallel_jobs.h"
#include "verifier/tensors/digest_identity.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {

namespace {

// The first element that is not bit-identical, or empty: where a reader starts looking.
std::vector<int64_t> first_differing_index(const LoadedTensor& a, const LoadedTensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size()) return {};
  // Most tensors of a diff are identical: one comparison of the whole buffer, not one per element
  // (a call per 4-byte element was 11% of a diff of two identical 320k-chunk checkpoints).
  if (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0) return {};
  const size_t size = dtype_size(a.dtype);
  for (size_t i = 0; i * size < a.bytes.size(); ++i) {
    if (std::memcmp(a.bytes.data() + i * size, b.bytes.data() + i * size, size) != 0) {
      return unravel_index(static_cast<int64_t>(i), a.shape);
    }
  }
  return {};
}

Result<DiffedTensor> compare_one(const DigestedSource& a, const DigestedSource& b, const std::string& name,
                                 const Tolerance& tolerance) {
  const SourceTensor* ta = a.source.find(name);
  const SourceTensor* tb = b.source.find(name);
  DiffedTensor row;
  if (!ta || !tb) {
    row.diff.name = name;
    row.diff.component = (ta ? ta : tb)->component;
    row.diff.mismatch = ta ? "only in A" : "only in B";
    return row;
  }
  if (identical_by_digests(a, *ta, b, *tb)) {
    row.diff = identical_tensor_diff(ta->name, ta->component, ta->dtype,
                                     static_cast<int64_t>(ta->bytes / dtype_size(ta->dtype)));
    return row;
  }
  CKPT_ASSIGN_OR_RETURN(LoadedTensor la, a.source.read_tensor(*ta));
  CKPT_ASSIGN_OR_RETURN(LoadedTensor lb, b.source.read_tensor(*tb));
  row.diff = compare_tensor(la.view(), lb.view(), tolerance);
  row.first_index = first_differing_index(la, lb);
  return row;
}

}  // namespace

Result<CheckpointDiff> diff_checkpoints(const std::string& path_a, const std::string& path_b,
                                        const Tolerance& tolerance) {
  // One side after the other, on the calling thread: an open already keeps both cores busy (its
  // manifest's digest on the second, its shards on both), and the calling thread allocates from
  // the huge-page heap. Two 320k-chunk opens side by side took 0.68-0.90 s, one after the other
  // 0.61-0.67 s (issue 44).
  CKPT_ASSIGN_OR_RETURN(const TensorSource a, TensorSource::open(path_a));
  CKPT_ASSIGN_OR_RETURN(const TensorSource b, TensorSource::open(path_b));
  return diff_sources(a, b, tolerance);
}

Result<CheckpointDiff> diff_sources(const TensorSource& a, const TensorSource& b,
                                    const Tolerance& tolerance) {
  CheckpointDiff out;
  out.a = a.path();
  out.b = b.path();
  out.tolerance = tolerance;
  std::set<std::string> unique;
  for (const auto& t : a.tensors()) unique.insert(t.name);
  for (const auto& t : b.tensors()) unique.insert(t.name);
  const std::vector<std::string> names(unique.begin(), unique.end());
  // Every file of both sides is hashed front to back first, on every core (verify's scan): a tensor
  // whose chunks hash alike on both sides is then known bit-identical without being read again,
  // and only the others are read. A diff of two 320k-chunk copies read each of 640k chunks with a
  // pread and compared them (issue 44).
  const ScannedChunkDigests digests_a = a.scan_chunk_digests();
  const ScannedChunkDigests digests_b = b.scan_chunk_digests();
  const DigestedSource side_a{a, digests_a}, side_b{b, digests_b};
  // Tensors are compared on every core (each reads both sides' chunks with pread): 26,682 tensors
  // one after another were most of a diff at 320k chunks (issue 44). Rows keep name order.
  CKPT_ASSIGN_OR_RETURN(std::vector<DiffedTensor> rows,
                        collect_parallel<DiffedTensor>(names.size(), [&](size_t i) {
                          return compare_one(side_a, side_b, names[i], tolerance);
                        }));
  for (DiffedTensor& row : rows) {
    out.identical = out.identical && row.diff.passed();
    ComponentRows& c = out.components[row.diff.component];
    c.summary.add(row.diff);
    c.rows.push_back(std::move(row));
  }
  return out;
}

nlohmann::json checkpoint_diff_to_json(const CheckpointDiff& diff) {
  const auto& components = diff.components;
  nlohmann::json comps = nlohmann::json::object();
  for (const auto& [name, c] : components) {
    nlohmann::json j = to_json(c.summary);
    j["tensors_differing"] = nlohmann::json::array();
    for (const auto& row : c.rows) {
      if (row.diff.bit_identical()) continue;
      nlohmann::json t = to_json(row.diff);
      t["first_index"] = row.first_index;
      j["tensors_differing"].push_back(std::move(t));
    }
    comps[name] = std::move(j);
  }
  return {{"a", diff.a},
          {"b", diff.b},
          {"rtol", diff.tolerance.rtol},
          {"atol", diff.tolerance.atol},
          {"identical", diff.identical},
          {"components", comps}};
}

std::string checkpoint_diff_to_text(const CheckpointDiff& diff) {
  std::string out = std::string(diff.identical ? "SAME " : "DIFF ") + diff.a + " vs " + diff.b + "\n";
  const auto& components = diff.components;
  for (const auto& [name, c] : components) {
    const ComponentDiff& s = c.summary;
    out += name + ": " + std::to_string(s.tensors) + " tensors, max abs " + format_number(s.max_abs) +
           ", max rel " + format_number(s.max_rel) + ", " +
           (s.bit_identical ? "bit-identical"
            : s.passed      ? "within tolerance"
                            : "differs") +
           "\n";
    for (const auto& row : c.rows) {
      const TensorDiff& d = row.diff;
      if (d.bit_identical()) continue;
      if (!d.mismatch.empty()) {
        out += "  " + d.name + ": " + d.mismatch + "\n";
        continue;
      }
      out += "  " + d.name + ": " + std::to_string(d.differing_elements) + " of " +
             std::to_string(d.elements) + " elements differ, max abs " + format_number(d.max_abs) + " at " +
             shape_to_string(d.max_abs_index) + ", max rel " + format_number(d.max_rel) + ", first at " +
             shape_to_string(row.first_index) + (d.passed() ? " (within tolerance)" : "") + "\n";
    }
  }
  return out;
}

}  // namespace ckpt
