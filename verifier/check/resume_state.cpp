#include "verifier/check/resume_state.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "base/text.h"

namespace ckpt {

namespace {

constexpr const char* kTensorKey = "__tensor__";
constexpr const char* kBytesKey = "__bytes__";  // a DCP bytes entry: its value is not read
// Nesting beyond this is not walked: a state dict is a few levels deep; the pickle reader already
// bounds what it emits.
constexpr size_t kMaxDepth = 64;

// The parts in the order they are reported.
const char* const kParts[] = {"optimizer", "scheduler", "scaler", "rng", "step", "incomplete_optimizer"};

const std::set<std::string>& step_keys() {
  static const std::set<std::string> keys = {"step",       "global_step",  "global_steps",    "steps",
                                             "iteration",  "iter",         "epoch",           "num_updates",
                                             "train_step", "current_step", "consumed_samples"};
  return keys;
}

std::vector<std::string> split_dotted(const std::string& path) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    parts.push_back(path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  return parts;
}

// A container's child by key: an object's member, an array's element by its decimal index.
const nlohmann::json* child(const nlohmann::json& node, const std::string& key) {
  if (node.is_object()) {
    const auto it = node.find(key);
    return it == node.end() ? nullptr : &*it;
  }
  if (node.is_array() && !key.empty() && key.size() < 10 && std::all_of(key.begin(), key.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    const size_t i = std::stoul(key);
    return i < node.size() ? &node[i] : nullptr;
  }
  return nullptr;
}

bool has(const nlohmann::json& node, const char* key) {
  return child(node, key) != nullptr;
}

const nlohmann::json* tensor_of(const nlohmann::json* node) {
  if (!node || !node->is_object()) return nullptr;
  const auto it = node->find(kTensorKey);
  // A pickled dict may use the key too: only what add_tensor() wrote counts.
  if (it == node->end() || !it->is_object() || !it->contains("dtype") || !it->contains("shape"))
    return nullptr;
  return &*it;
}

bool is_tensor(const nlohmann::json* node, const char* dtype, int64_t numel) {
  const nlohmann::json* t = tensor_of(node);
  if (!t) return false;
  const nlohmann::json& shape = t->at("shape");
  return t->at("dtype") == dtype && shape.is_array() && shape.size() == 1 && shape[0] == numel;
}

// An array (or, after flattening, an object keyed "0".."n-1") of `n` numbers.
bool is_number_list(const nlohmann::json* node, size_t n) {
  if (!node || !node->is_array() || node->size() != n) return false;
  return std::all_of(node->begin(), node->end(), [](const nlohmann::json& v) { return v.is_number(); });
}

bool is_rng_state(const nlohmann::json& node, const std::string& path) {
  // torch.get_rng_state(): the CPU mt19937 generator's 5056 bytes.
  if (is_tensor(&node, "U8", 5056)) return true;
  // A CUDA (Philox) generator's seed and offset: 16 bytes, told apart from other masks by its key.
  std::string lower = path;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (is_tensor(&node, "U8", 16) &&
      (lower.find("rng") != std::string::npos || lower.find("random") != std::string::npos ||
       lower.find("cuda") != std::string::npos))
    return true;
  if (tensor_of(&node)) return false;
  // numpy.random.get_state(): ('MT19937', uint32[624], pos, has_gauss, cached_gaussian).
  const nlohmann::json* first = child(node, "0");
  const nlohmann::json* second = child(node, "1");
  if (first && *first == "MT19937" && (is_tensor(second, "U32", 624) || is_number_list(second, 624)))
    return true;
  // numpy.random.Generator.bit_generator.state: {"bit_generator": "PCG64", "state": {...}, ...}.
  if (node.is_object() && has(node, "bit_generator") && has(node, "state") &&
      node.at("bit_generator").is_string())
    return true;
  // random.getstate(): (3, (625 ints), gauss_next).
  return first && *first == 3 && is_number_list(second, 625);
}

bool is_step_value(const nlohmann::json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return true;
  if (value.is_number_float()) {
    const double d = value.get<double>();
    return d >= 0 && d == static_cast<double>(static_cast<int64_t>(d));
  }
  if (const nlohmann::json* t = tensor_of(&value)) return t->at("shape").empty();  // a 0-d tensor
  return value.is_object() && value.contains(kBytesKey);
}

// Whether `state` (an optimizer's per-parameter state) looks like one: parameters whose state holds
// moments (Adam, SGD momentum, RMSprop, Adagrad).
bool looks_like_param_state(const nlohmann::json& state) {
  if (!state.is_object()) return false;
  for (const auto& [key, per_param] : state.items()) {
    if (!per_param.is_object()) continue;
    for (const char* moment : {"exp_avg", "exp_avg_sq", "momentum_buffer", "square_avg", "sum"}) {
      if (per_param.contains(moment)) return true;
    }
  }
  return false;
}

void walk(const nlohmann::json& node, const std::string& label, const std::string& path, size_t depth,
          std::vector<ResumeStateFound>& out) {
  if (depth > kMaxDepth || !(node.is_object() || node.is_array()) || tensor_of(&node) != nullptr) return;
  const std::string where = label.empty() ? path : path.empty() ? label : label + ": " + path;
  const auto found = [&](const char* part) { out.push_back({part, where}); };
  if (has(node, "state") && has(node, "param_groups")) return found("optimizer");
  if (has(node, "last_epoch") && (has(node, "_last_lr") || has(node, "base_lrs") || has(node, "_step_count")))
    return found("scheduler");
  if (has(node, "scale") && has(node, "_growth_tracker")) return found("scaler");
  if (node.is_object() && ((has(node, "param_groups") && !has(node, "state")) ||
                           (has(node, "state") && looks_like_param_state(node.at("state")))))
    return found("incomplete_optimizer");
  if (is_rng_state(node, path)) return found("rng");
  const auto sub = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (step_keys().count(key) && is_step_value(value)) {
        out.push_back({"step", label.empty() ? sub(key) : label + ": " + sub(key)});
        continue;
      }
      if (is_rng_state(value, sub(key))) {
        out.push_back({"rng", label.empty() ? sub(key) : label + ": " + sub(key)});
        continue;
      }
      walk(value, label, sub(key), depth + 1, out);
    }
  } else {
    for (size_t i = 0; i < node.size(); ++i) {
      if (node[i].is_object() || node[i].is_array())
        walk(node[i], label, sub(std::to_string(i)), depth + 1, out);
    }
  }
}

}  // namespace

nlohmann::json& ResumeStateTree::node_at(const std::string& label, const std::string& dotted_path) {
  nlohmann::json* node = &root_[label];
  if (dotted_path.empty()) return *node;
  for (const std::string& key : split_dotted(dotted_path)) {
    if (!node->is_object()) *node = nlohmann::json::object();  // a leaf in the way: the later key wins
    node = &(*node)[key];
  }
  return *node;
}

void ResumeStateTree::add_tensor(const std::string& dotted_path, DType dtype,
                                 const std::vector<int64_t>& shape, const std::string& label) {
  node_at(label, dotted_path) = {{kTensorKey, {{"dtype", dtype_name(dtype)}, {"shape", shape}}}};
}

void ResumeStateTree::add_value(const std::string& dotted_path, const nlohmann::json& value,
                                const std::string& label) {
  nlohmann::json& node = node_at(label, dotted_path);
  if (node.is_object() && value.is_object()) {
    for (const auto& [k, v] : value.items()) node[k] = v;
  } else {
    node = value;
  }
}

void ResumeStateTree::add_file(const TensorFile& file, const std::string& label) {
  for (const ChunkInfo& c : file.chunks()) add_tensor(c.name, c.dtype, c.global_shape, label);
  const nlohmann::json& m = file.metadata();
  if (!m.is_object()) return;
  for (const auto& [key, value] : m.items()) {
    if (value.is_string() && starts_with(value.get<std::string>(), "ref:")) continue;  // an alias
    // The pickle reader names a root that holds no tensor "value" (a scheduler's own file).
    add_value(key == "value" && file.chunks().empty() ? "" : key, value, label);
  }
}

std::vector<ResumeStateFound> ResumeStateTree::find() const {
  std::vector<ResumeStateFound> all;
  for (const auto& [label, tree] : root_.items()) walk(tree, label, "", 0, all);
  std::vector<ResumeStateFound> ordered;
  for (const char* part : kParts) {
    for (const ResumeStateFound& f : all) {
      if (f.part == part) ordered.push_back(f);
    }
  }
  return ordered;
}

bool holds_resume_part(const std::vector<ResumeStateFound>& found, const std::string& part) {
  return std::any_of(found.begin(), found.end(), [&](const ResumeStateFound& f) { return f.part == part; });
}

std::string optimizer_missing_advice(const std::string& what, const std::vector<ResumeStateFound>& found) {
  for (const ResumeStateFound& f : found) {
    if (f.part == "incomplete_optimizer") {
      return what + "; the optimizer state dict at '" + f.where +
             "' lacks 'state' or 'param_groups', and torch.optim.Optimizer.load_state_dict needs both: "
             "save optimizer.state_dict() whole";
    }
  }
  // A step counter alone is no evidence: weights-only saves keep one too (Lightning's
  // save_weights_only, the Trainer's save_only_model).
  const bool saved_to_resume =
      std::any_of(found.begin(), found.end(), [](const ResumeStateFound& f) { return f.part != "step"; });
  if (saved_to_resume) {
    return what + "; it holds " + describe_resume_state(found) +
           ", so it was saved to be resumed, and a resume would start the optimizer from nothing: save "
           "optimizer.state_dict() with them";
  }
  return what + "; a resume would lack it (pass --weights-only if this holds only model weights)";
}

}  // namespace ckpt
