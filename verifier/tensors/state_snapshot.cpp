#include "verifier/tensors/state_snapshot.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/parallel_jobs.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxJsonFileBytes = 64ull << 20;
constexpr int kMaxSnapshotDepth = 4;  // levels of subdirectories read below a checkpoint directory

std::string top_level_key(const std::string& name) {
  return name.substr(0, name.find('.'));
}

// Non-tensor leaves of a JSON value, by dotted path.
void add_leaves(const nlohmann::json& j, const std::string& prefix, const std::string& component,
                std::map<std::string, SnapshotValue>* out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      add_leaves(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), component, out);
    return;
  }
  (*out)[prefix] = {component.empty() ? top_level_key(prefix) : component, j, py_value_from_json(j)};
}

// Whether a tensor lies anywhere below `v` (remembered per node: the value is a DAG).
bool holds_tensor(const PyValue& v, std::unordered_map<const PyValue*, bool>* memo) {
  if (v.type == PyType::kTensor) return true;
  const auto known = memo->find(&v);
  if (known != memo->end()) return known->second;
  bool found = false;
  for (const auto& item : v.items) found = found || (item && holds_tensor(*item, memo));
  for (const auto& kv : v.dict) found = found || holds_tensor(*kv.second, memo);
  (*memo)[&v] = found;
  return found;
}

// A pickle's non-tensor leaves, typed, by the dotted paths the reader's metadata view names them:
// dicts and objects are walked into (an object's class is a leaf of its own), a sequence only when
// a tensor lies below it; tensors are compared as tensors.
void add_typed_leaves(const PyValuePtr& v, const std::string& path, const std::string& component,
                      std::unordered_map<const PyValue*, bool>* memo,
                      std::map<std::string, SnapshotValue>* out) {
  if (!v || v->type == PyType::kTensor) return;
  const auto sub = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  const auto leaf = [&](const std::string& name, const PyValuePtr& value) {
    (*out)[name] = {component.empty() ? top_level_key(name) : component, py_value_to_json(*value), value};
  };
  const bool walk_in = v->type == PyType::kObject || (v->type == PyType::kDict && !v->dict.empty()) ||
                       ((v->type == PyType::kList || v->type == PyType::kTuple) && holds_tensor(*v, memo));
  if (!walk_in) return leaf(path, v);
  if (v->type == PyType::kObject) {
    PyValue cls;
    cls.type = PyType::kStr;
    cls.s = v->s;
    leaf(sub(v->i ? "__call__" : "__class__"), std::make_shared<const PyValue>(std::move(cls)));
  }
  for (const auto& [name, part] : py_value_parts(*v)) add_typed_leaves(part, sub(name), component, memo, out);
}

// Every tensor of `path` (a committed checkpoint or one file), named `prefix` + its own name.
Status add_source(const std::string& path, const std::string& prefix, const std::string& component,
                  uint64_t max_bytes, StateSnapshot* out, uint64_t* total) {
  CKPT_ASSIGN_OR_RETURN(TensorSource opened, TensorSource::open(path));
  const std::vector<SourceTensor>& tensors = opened.tensors();
  for (const SourceTensor& t : tensors) {
    *total += t.bytes;
    if (*total > max_bytes)
      return Status::invalid_argument(path + ": more than " + std::to_string(max_bytes) +
                                      " bytes of tensors to compare");
  }
  if (opened.manifest() != nullptr) {
    // A committed checkpoint: checked now, read again only where a comparison needs its bytes.
    CKPT_ASSIGN_OR_RETURN(ScannedChunkDigests digests, opened.check_tensors());
    auto checked =
        std::make_shared<const CheckedSource>(CheckedSource{std::move(opened), std::move(digests)});
    out->tensors.reserve(out->tensors.size() + checked->source.tensors().size());
    for (const SourceTensor& t : checked->source.tensors())
      out->tensors.emplace_back(checked, t, prefix + t.name, t.component);
    return Status::ok();
  }
  const TensorSource& source = opened;
  CKPT_ASSIGN_OR_RETURN(std::vector<LoadedTensor> loaded, source.read_tensors());
  out->tensors.reserve(out->tensors.size() + loaded.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    LoadedTensor& t = loaded[i];
    t.name = prefix + tensors[i].name;
    t.component = !component.empty() ? component : top_level_key(tensors[i].name);
    out->tensors.emplace_back(std::move(t));
  }
  // A torch.save file's non-tensor leaves (step counters, scheduler and scaler state) are state too,
  // compared typed (a tuple is not a list).
  const PyValuePtr root = source.state_value();
  if (std::string(source.kind()) == "pytorch" && root) {
    std::unordered_map<const PyValue*, bool> memo;
    const std::string file = prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1);
    // A file whose whole pickle is plain data: its leaves are named by the file ("value" alone).
    const std::string path = holds_tensor(*root, &memo) ? file : file.empty() ? "value" : file;
    add_typed_leaves(root, path, component, &memo, &out->values);
  }
  return Status::ok();
}

// `v`'s text with every int and float replaced by its type, its numbers appended to *numbers in
// order: two values with one skeleton differ only in their numbers (compared within the tolerance);
// anything else (a type, a str, bytes, a key) is in the skeleton and must be equal. Dict entries go
// in key order, so the numbers of both sides line up.
std::string numbers_and_skeleton(const PyValue& v, std::vector<double>* numbers) {
  switch (v.type) {
    case PyType::kInt: numbers->push_back(static_cast<double>(v.i)); return "int";
    case PyType::kFloat: numbers->push_back(v.f); return "float";
    case PyType::kTuple:
    case PyType::kList: {
      std::string out = py_type_name(v) + "(";
      for (const auto& item : v.items) out += numbers_and_skeleton(*item, numbers) + ",";
      return out + ")";
    }
    case PyType::kDict: {
      std::vector<std::pair<std::string, const PyValue*>> entries;
      for (const auto& [k, val] : v.dict) entries.emplace_back(py_key_identity(*k), val.get());
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string out = "dict{";
      for (const auto& [k, val] : entries) out += k + ":" + numbers_and_skeleton(*val, numbers) + ",";
      return out + "}";
    }
    default: return py_key_identity(v);  // sets, objects, text, bytes: exactly
  }
}

TensorDiff compare_value(const std::string& name, const SnapshotValue* reference,
                         const SnapshotValue* resumed, const Tolerance& tolerance) {
  if (!reference || !resumed) {
    TensorDiff d = one_side_only(name, (reference ? reference : resumed)->component, reference != nullptr);
    d.elements = 1;
    return d;
  }
  TensorDiff d;
  d.name = name;
  d.component = reference->component;
  d.elements = 1;
  // The typed values (diff's rules, formats/py_value.h); a value made by hand has only its JSON.
  const PyValuePtr a = reference->typed ? reference->typed : py_value_from_json(reference->value);
  const PyValuePtr b = resumed->typed ? resumed->typed : py_value_from_json(resumed->value);
  std::vector<double> want, got;
  if (numbers_and_skeleton(*a, &want) == numbers_and_skeleton(*b, &got) && !want.empty()) {
    // One shape (a number, or a Python RNG state's nested lists): compared number by number.
    d.elements = static_cast<int64_t>(want.size());
    int64_t worst = -1, first_exceeding = -1;
    for (size_t i = 0; i < want.size(); ++i) {
      const double x = want[i], y = got[i];
      if (x == y || (std::isnan(x) && std::isnan(y))) continue;
      ++d.differing_elements;
      const double diff = std::fabs(y - x);
      if (worst < 0 || std::isnan(diff) || diff > d.max_abs) {
        d.max_abs = diff;
        worst = static_cast<int64_t>(i);
      }
      raise_to(&d.max_rel, x == 0 ? INFINITY : diff / std::fabs(x));
      if (!within_tolerance(x, y, tolerance)) {
        ++d.exceeding_elements;
        if (first_exceeding < 0) first_exceeding = static_cast<int64_t>(i);
      }
    }
    const bool number = a->type == PyType::kInt || a->type == PyType::kFloat;
    if (worst >= 0 && !number) d.max_abs_index = {worst};
    if (first_exceeding >= 0) {
      const auto i = static_cast<size_t>(first_exceeding);
      d.mismatch =
          (number ? "is " : "number " + std::to_string(i) + " of " + std::to_string(want.size()) + " is ") +
          format_number(got[i]) + ", reference " + format_number(want[i]);
    }
  } else if (!py_values_equal(*a, *b)) {
    d.comparable = false;
    d.differing_elements = 1;
    d.exceeding_elements = 1;
    const bool retyped = py_type_name(*a) != py_type_name(*b);
    d.mismatch = "is " + py_value_repr(*b, 80) + (retyped ? " (" + py_type_name(*b) + ")" : "") +
                 ", reference " + py_value_repr(*a, 80) + (retyped ? " (" + py_type_name(*a) + ")" : "");
  }
  return d;
}

// The tensors sorted by name, one per name: the last listed, as a map by name keeps it.
std::vector<const SnapshotTensor*> by_name(const std::vector<SnapshotTensor>& tensors) {
  std::vector<const SnapshotTensor*> out;
  out.reserve(tensors.size());
  for (const SnapshotTensor& t : tensors) out.push_back(&t);
  const auto before = [](const SnapshotTensor* a, const SnapshotTensor* b) { return a->name < b->name; };
  // A committed checkpoint's tensors come sorted already.
  if (!std::is_sorted(out.begin(), out.end(), before)) std::stable_sort(out.begin(), out.end(), before);
  std::vector<const SnapshotTensor*> unique;
  unique.reserve(out.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (i + 1 == out.size() || out[i]->name != out[i + 1]->name) unique.push_back(out[i]);
  return unique;
}

}  // namespace

Result<StateSnapshot> read_state_snapshot(const std::string& path, uint64_t max_bytes) {
  StateSnapshot out;
  out.path = path;
  uint64_t total = 0;
  if (!is_directory(path) || path_exists(path + "/" + kManifestFileName) ||
      path_exists(path + "/" + kLatestFileName)) {
    CKPT_RETURN_IF_ERROR(add_source(path, "", "", max_bytes, &out, &total));
    return out;
  }
  std::vector<fs::path> files;  // relative to `path`
  std::error_code ec;
  // Subdirectories too (a per-rank directory: rank1/state.pt), a few levels deep; a link to a
  // directory is not followed.
  fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && it.depth() + 1 >= kMaxSnapshotDepth) it.disable_recursion_pending();
    if (it->is_regular_file(ec)) files.push_back(it->path().lexically_relative(path));
  }
  if (ec) return Status::io_error(path + ": cannot list: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& relative : files) {
    const fs::path f = fs::path(path) / relative;
    // "optimizer.pt" -> "optimizer"; "rank1/state.pt" -> "rank1/state".
    const std::string stem = (relative.parent_path() / relative.stem()).generic_string(),
                      name = relative.generic_string();
    if (f.extension() == ".json") {
      auto j = read_json_file(f.string(), kMaxJsonFileBytes);
      if (!j.is_ok()) {
        out.unreadable.push_back(name + ": " + j.status().message());
        continue;
      }
      add_leaves(*j, stem, stem, &out.values);
      continue;
    }
    Status added = add_source(f.string(), stem + ".", stem, max_bytes, &out, &total);
    if (!added.is_ok()) {
      if (added.code() == StatusCode::kInvalidArgument) return added;  // over the byte bound
      out.unreadable.push_back(name + ": " + added.message());
    }
  }
  return out;
}

std::map<std::string, ComponentDiff> compare_snapshots(const StateSnapshot& reference,
                                                       const StateSnapshot& resumed,
                                                       const Tolerance& tolerance) {
  // By name: a tensor on one side only fails its component. The two sides are joined as sorted
  // lists: maps of 20,000 names took most of a comparison whose tensors are known identical by
  // their digests (issue 44).
  const std::vector<const SnapshotTensor*> ref = by_name(reference.tensors), got = by_name(resumed.tensors);
  std::vector<std::pair<const SnapshotTensor*, const SnapshotTensor*>> pairs;
  pairs.reserve(std::max(ref.size(), got.size()));
  for (size_t i = 0, j = 0; i < ref.size() || j < got.size();) {
    const int order = i == ref.size() ? 1 : j == got.size() ? -1 : ref[i]->name.compare(got[j]->name);
    pairs.emplace_back(order <= 0 ? ref[i] : nullptr, order >= 0 ? got[j] : nullptr);
    i += order <= 0 ? 1 : 0;
    j += order >= 0 ? 1 : 0;
  }
  // On every core: a tensor whose digests differ is read again from both sides.
  std::vector<TensorDiff> diffs(pairs.size());
  run_parallel(pairs.size(), resolve_jobs(0, pairs.size()), [&](size_t i) {
    const auto [r, g] = pairs[i];
    diffs[i] = r && g ? compare_snapshot_tensors(*r, *g, tolerance)
                      : one_side_only((r ? r : g)->name, (r ? r : g)->component, r != nullptr);
  });
  std::map<std::string, ComponentDiff> components;
  for (const TensorDiff& d : diffs) components[d.component].add(d);
  std::set<std::string> names;
  for (const auto& [n, v] : reference.values) names.insert(n);
  for (const auto& [n, v] : resumed.values) names.insert(n);
  for (const auto& name : names) {
    auto r = reference.values.find(name);
    auto g = resumed.values.find(name);
    const TensorDiff d = compare_value(name, r == reference.values.end() ? nullptr : &r->second,
                                       g == resumed.values.end() ? nullptr : &g->second, tolerance);
    components[d.component].add(d);
  }
  return components;
}

}  // namespace ckpt
