#include "verifier/tensors/checkpoint_diff.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
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

// The non-tensor state a side holds: a tensor file's values (its pickle's numbers, strings, objects),
// a ckptcheck checkpoint's step and extra state (its config, pins, creation time and shard list are
// how it was written, not what it holds). An index or DCP folder has none beyond its tensors.
nlohmann::json state_values(const TensorSource& s) {
  const nlohmann::json& m = s.metadata();
  if (std::strcmp(s.kind(), "checkpoint") == 0)
    return {{"step", m.value("step", nlohmann::json())}, {"extra", m.value("extra", nlohmann::json())}};
  if (std::strcmp(s.kind(), "safetensors_index") == 0 || std::strcmp(s.kind(), "dcp") == 0) return nullptr;
  return m;
}

// A value's text for a message: a string as itself, anything else as JSON.
std::string value_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void diff_values(const nlohmann::json& a, const nlohmann::json& b, const std::string& path,
                 CheckpointDiff& out) {
  const auto add = [&](nlohmann::json va, nlohmann::json vb, std::string missing_on, std::string at) {
    ++out.values_differing;
    if (out.values.size() < kDiffMaxListedValues)
      out.values.push_back({at.empty() ? "(root)" : at, std::move(va), std::move(vb), std::move(missing_on)});
  };
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const std::string& k : keys) {
      const std::string sub = path.empty() ? k : path + "." + k;
      const bool in_a = a.contains(k), in_b = b.contains(k);
      if (in_a && in_b) {
        diff_values(a[k], b[k], sub, out);
      } else {
        add(in_a ? a[k] : nullptr, in_b ? b[k] : nullptr, in_a ? "b" : "a", sub);
      }
    }
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) diff_values(a[i], b[i], path + "." + std::to_string(i), out);
    return;
  }
  // A number compares by value (an int 3 and a float 3.0 are one step), anything else exactly.
  if (a.is_number() && b.is_number() && a.get<double>() == b.get<double>()) return;
  if (a != b) add(a, b, "", path);
}

}  // namespace

std::optional<double> step_of(const nlohmann::json& values) {
  if (!values.is_object()) return std::nullopt;
  const nlohmann::json* root = &values;
  if (values.contains("value") && values["value"].is_object()) root = &values["value"];
  for (const char* key : {"global_step", "step", "iteration"}) {
    for (const nlohmann::json* j : {root, &values}) {
      const auto it = j->find(key);
      if (it != j->end() && it->is_number()) return it->get<double>();
    }
  }
  return std::nullopt;
}

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
  // Values compare between two sources of one kind (two torch.save files, two ckptcheck
  // checkpoints); across kinds (a checkpoint and its `convert`ed copy) each format keeps other
  // bookkeeping, and only the step both name is compared.
  const nlohmann::json va = state_values(a), vb = state_values(b);
  if (!va.is_null() && !vb.is_null()) {
    const auto sa = step_of(va), sb = step_of(vb);
    if (std::strcmp(a.kind(), b.kind()) == 0) {
      diff_values(va, vb, "", out);
    } else if (sa && sb && *sa != *sb) {
      const auto number = [](double v) {
        return v == std::floor(v) && std::fabs(v) < 9e15 ? nlohmann::json(static_cast<int64_t>(v))
                                                         : nlohmann::json(v);
      };
      diff_values(nlohmann::json{{"step", number(*sa)}}, nlohmann::json{{"step", number(*sb)}}, "", out);
    }
    out.identical = out.identical && out.values_differing == 0;
    if (sa && sb && *sa != *sb) {
      const auto number = [](double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        return std::string(buf);
      };
      out.headline = "step " + number(*sa) + " vs " + number(*sb) + " (" + (*sb < *sa ? "b" : "a") +
                     " is an older checkpoint, or another run's)";
    }
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
  nlohmann::json values = nlohmann::json::array();
  for (const ValueDifference& v : diff.values)
    values.push_back({{"path", v.path}, {"a", v.a}, {"b", v.b}, {"missing_on", v.missing_on}});
  return {{"a", diff.a},
          {"b", diff.b},
          {"rtol", diff.tolerance.rtol},
          {"atol", diff.tolerance.atol},
          {"identical", diff.identical},
          {"headline", diff.headline},
          {"components", comps},
          {"values_differing", diff.values_differing},
          {"values", values}};
}

std::string checkpoint_diff_to_text(const CheckpointDiff& diff) {
  std::string out = std::string(diff.identical ? "SAME " : "DIFF ") + diff.a + " vs " + diff.b + "\n";
  if (!diff.headline.empty()) out += diff.headline + "\n";
  if (diff.values_differing > 0) {
    out += "values: " + std::to_string(diff.values_differing) + " differ\n";
    for (const ValueDifference& v : diff.values) {
      out += "  " + v.path + ": " +
             (v.missing_on == "a"   ? "absent in a, " + value_text(v.b) + " in b"
              : v.missing_on == "b" ? value_text(v.a) + " in a, absent in b"
                                    : value_text(v.a) + " vs " + value_text(v.b)) +
             "\n";
    }
    if (diff.values_differing > diff.values.size())
      out += "  ... and " + std::to_string(diff.values_differing - diff.values.size()) + " more\n";
  }
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
