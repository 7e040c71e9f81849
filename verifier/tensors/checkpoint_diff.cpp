#include "verifier/tensors/checkpoint_diff.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/parallel_jobs.h"
#include "formats/py_value.h"
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

// The non-tensor state a side holds, typed (formats/py_value.h): a tensor file's pickle value (its
// numbers, strings, tuples, bytes, objects), a ckptcheck checkpoint's step and extra state (its
// config, pins, creation time and shard list are how it was written, not what it holds). An index or
// DCP folder has none beyond its tensors.
PyValuePtr state_values(const TensorSource& s) {
  if (std::strcmp(s.kind(), "checkpoint") == 0) {
    const nlohmann::json& m = s.metadata();
    return py_value_from_json(
        {{"step", m.value("step", nlohmann::json())}, {"extra", m.value("extra", nlohmann::json())}});
  }
  if (std::strcmp(s.kind(), "safetensors_index") == 0 || std::strcmp(s.kind(), "dcp") == 0) return nullptr;
  return s.state_value();
}

// Two states walked together by path. A path differs where the sides hold values of other types
// (a tuple and a list, bytes and text, 3 and 3.0), other values, or a key only one side has. The
// walk follows the typed trees, which share nodes where the pickle shared them (a memo GET): a pair
// of nodes is walked again only while there is room to list what it holds, so a hostile DAG of 2^30
// paths costs one walk per pair, and every difference is still counted.
class ValueDiffWalk {
 public:
  explicit ValueDiffWalk(CheckpointDiff& out) : out_(out) {}

  size_t walk(const PyValuePtr& a, const PyValuePtr& b, const std::string& path) {
    if (a == b) return 0;
    if (!a || !b) return add(a, b, a ? "b" : "a", path);
    const auto key = std::make_pair(a.get(), b.get());
    const auto seen = counted_.find(key);
    if (seen != counted_.end() && (seen->second == 0 || listing_full())) return seen->second;
    const size_t n = compare(a, b, path);
    counted_[key] = n;
    return n;
  }

 private:
  bool listing_full() const { return out_.values.size() >= kDiffMaxListedValues; }

  size_t add(const PyValuePtr& a, const PyValuePtr& b, const std::string& missing_on,
             const std::string& path) {
    if (listing_full()) return 1;
    ValueDifference d;
    d.path = path.empty() ? "(root)" : path;
    d.missing_on = missing_on;
    if (a) {
      d.a = py_value_to_json(*a);
      d.a_type = py_type_name(*a);
      d.a_repr = py_value_repr(*a);
    }
    if (b) {
      d.b = py_value_to_json(*b);
      d.b_type = py_type_name(*b);
      d.b_repr = py_value_repr(*b);
    }
    out_.values.push_back(std::move(d));
    return 1;
  }

  static size_t saturating_add(size_t x, size_t y) { return x > SIZE_MAX - y ? SIZE_MAX : x + y; }

  size_t compare(const PyValuePtr& a, const PyValuePtr& b, const std::string& path) {
    const auto sub = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
    if (a->type != b->type) return add(a, b, "", path);
    switch (a->type) {
      case PyType::kTensor: return 0;  // compared as tensors, by name
      case PyType::kTuple:
      case PyType::kList: {
        if (a->items.size() != b->items.size()) return add(a, b, "", path);
        size_t n = 0;
        for (size_t k = 0; k < a->items.size(); ++k)
          n = saturating_add(n, walk(a->items[k], b->items[k], sub(std::to_string(k))));
        return n;
      }
      case PyType::kDict: return compare_dicts(*a, *b, sub);
      case PyType::kObject: {
        if (a->s != b->s || a->i != b->i) return add(a, b, "", path);
        const auto pa = py_value_parts(*a), pb = py_value_parts(*b);
        std::map<std::string, PyValuePtr> in_b(pb.begin(), pb.end());
        size_t n = 0;
        for (const auto& [name, va] : pa) {
          const auto it = in_b.find(name);
          n = saturating_add(
              n, it == in_b.end() ? add(va, nullptr, "b", sub(name)) : walk(va, it->second, sub(name)));
          if (it != in_b.end()) in_b.erase(it);
        }
        for (const auto& [name, vb] : pb) {
          if (in_b.count(name)) n = saturating_add(n, add(nullptr, vb, "a", sub(name)));
        }
        return n;
      }
      default: return py_values_equal(*a, *b) ? 0 : add(a, b, "", path);
    }
  }

  // A dict's items matched by key as Python matches them (0, '0' and False are three keys; an
  // optimizer state keyed '0' is not the one keyed 0, and load_state_dict would drop it). A key only
  // one side has is named with its type where the other side has a key of the same text.
  template <typename Sub>
  size_t compare_dicts(const PyValue& a, const PyValue& b, const Sub& sub) {
    const auto name_of = [](const PyValue& k) { return k.type == PyType::kStr ? k.s : py_value_repr(k); };
    std::map<std::string, size_t> b_by_key;
    std::set<std::string> a_names, b_names;
    for (size_t j = 0; j < b.dict.size(); ++j) {
      if (!b.dict[j].first) continue;
      b_by_key.emplace(py_key_identity(*b.dict[j].first), j);
      b_names.insert(name_of(*b.dict[j].first));
    }
    for (const auto& [k, v] : a.dict) {
      if (k) a_names.insert(name_of(*k));
    }
    const auto lone_name = [&](const PyValue& k, const std::set<std::string>& other) {
      const std::string n = name_of(k);
      return other.count(n) ? n + " (" + py_type_name(k) + " key)" : n;
    };
    std::vector<bool> matched(b.dict.size(), false);
    size_t n = 0;
    for (const auto& [ka, va] : a.dict) {
      if (!ka) continue;
      const auto it = b_by_key.find(py_key_identity(*ka));
      if (it == b_by_key.end()) {
        n = saturating_add(n, add(va, nullptr, "b", sub(lone_name(*ka, b_names))));
        continue;
      }
      matched[it->second] = true;
      n = saturating_add(n, walk(va, b.dict[it->second].second, sub(name_of(*ka))));
    }
    for (size_t j = 0; j < b.dict.size(); ++j) {
      if (!matched[j] && b.dict[j].first)
        n = saturating_add(n, add(nullptr, b.dict[j].second, "a", sub(lone_name(*b.dict[j].first, a_names))));
    }
    return n;
  }

  CheckpointDiff& out_;
  std::map<std::pair<const PyValue*, const PyValue*>, size_t> counted_;
};

// A value's text for a message: its repr, with its type where the other side's differs.
std::string value_text(const ValueDifference& v, bool a_side) {
  const std::string& repr = a_side ? v.a_repr : v.b_repr;
  if (v.missing_on.empty() && v.a_type != v.b_type) return repr + " (" + (a_side ? v.a_type : v.b_type) + ")";
  return repr;
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
  // Values compare between two sources of one kind (two torch.save files, two ckptcheck
  // checkpoints); across kinds (a checkpoint and its `convert`ed copy) each format keeps other
  // bookkeeping, and only the step both name is compared.
  const PyValuePtr va = state_values(a), vb = state_values(b);
  if (va && vb) {
    const auto sa = step_of(a.metadata()), sb = step_of(b.metadata());
    if (std::strcmp(a.kind(), b.kind()) == 0) {
      out.values_differing = ValueDiffWalk(out).walk(va, vb, "");
    } else if (sa && sb && *sa != *sb) {
      const auto number = [](double v) {
        return v == std::floor(v) && std::fabs(v) < 9e15 ? nlohmann::json(static_cast<int64_t>(v))
                                                         : nlohmann::json(v);
      };
      out.values_differing = ValueDiffWalk(out).walk(py_value_from_json({{"step", number(*sa)}}),
                                                     py_value_from_json({{"step", number(*sb)}}), "");
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
    values.push_back({{"path", v.path},
                      {"a", v.a},
                      {"b", v.b},
                      {"a_type", v.a_type},
                      {"b_type", v.b_type},
                      {"a_repr", v.a_repr},
                      {"b_repr", v.b_repr},
                      {"missing_on", v.missing_on}});
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
             (v.missing_on == "a"   ? "absent in a, " + value_text(v, false) + " in b"
              : v.missing_on == "b" ? value_text(v, true) + " in a, absent in b"
                                    : value_text(v, true) + " vs " + value_text(v, false)) +
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
