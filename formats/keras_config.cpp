#include "formats/keras_config.h"

#include <nlohmann/json.hpp>

#include "base/text.h"

namespace ckpt {

namespace {

constexpr int kMaxKerasConfigDepth = 64;

// A module Keras itself serializes built-in classes under; any other module is a user's code.
bool is_keras_module(const std::string& module) {
  for (const char* root : {"keras", "tf_keras", "tensorflow.keras", "tensorflow.python.keras", "builtins"}) {
    const std::string r = root;
    if (module == r || starts_with(module, r + ".")) return true;
  }
  return false;
}

std::string text_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Why a layer object {"class_name": ..., "config": {...}} (or its config) names code, or "".
std::string code_reason(const std::string& class_name, const nlohmann::json& config) {
  if (class_name == "__lambda__") return "a Keras 3 lambda: Python source or bytecode in its config";
  if (!config.is_object()) return "";
  const std::string function_type = text_of(config, "function_type");
  if (class_name == "Lambda" || !function_type.empty() || config.contains("function")) {
    if (function_type == "lambda") return "marshalled Python bytecode (function_type 'lambda')";
    if (!function_type.empty()) return "a Python function by name (function_type '" + function_type + "')";
    if (class_name == "Lambda") return "a Lambda layer: arbitrary Python run when the model is loaded";
  }
  const std::string module = text_of(config, "module");
  if (!module.empty() && !is_keras_module(module)) return "code imported from module '" + module + "'";
  return "";
}

void walk(const nlohmann::json& j, const std::string& attribute, int depth,
          std::vector<KerasCodeReference>& out) {
  // Past the limit Keras still builds every layer, so what lies there is refused, never skipped (a
  // Lambda 25 Sequentials deep passed when this returned quietly).
  if (depth > kMaxKerasConfigDepth) {
    const std::string too_deep = "the config nests deeper than " + std::to_string(kMaxKerasConfigDepth) +
                                 " levels, so what loading builds there cannot be checked";
    const bool said = !out.empty() && out.back().reason == too_deep;  // once per attribute
    if ((j.is_object() || j.is_array()) && !said) out.push_back({attribute, "", "", too_deep});
    return;
  }
  if (j.is_array()) {
    for (const auto& item : j) walk(item, attribute, depth + 1, out);
    return;
  }
  if (!j.is_object()) return;
  const std::string class_name = text_of(j, "class_name");
  const auto config = j.find("config");
  if (!class_name.empty()) {
    std::string reason = config != j.end() ? code_reason(class_name, *config) : std::string();
    // Keras 3 names the module of every object beside its class: outside Keras it is user code.
    const std::string module = text_of(j, "module");
    if (reason.empty() && !module.empty() && !is_keras_module(module))
      reason = "code imported from module '" + module + "'";
    if (!reason.empty()) {
      std::string layer = config != j.end() && config->is_object() ? text_of(*config, "name") : std::string();
      out.push_back({attribute, layer.empty() ? class_name : layer, class_name, reason});
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) walk(it.value(), attribute, depth + 1, out);
}

}  // namespace

std::vector<KerasCodeReference> find_keras_code(const std::string& attribute, const std::string& json_text) {
  std::vector<KerasCodeReference> out;
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded()) {
    out.push_back(
        {attribute, "", "", "the attribute is not JSON, so what loading it builds cannot be checked"});
    return out;
  }
  walk(j, attribute, 0, out);
  return out;
}

}  // namespace ckpt
