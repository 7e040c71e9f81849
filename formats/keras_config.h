// Code references in a Keras model's saved configuration. A Keras 2 full-model `.h5` (and Keras 3's
// legacy `.h5`) keeps the architecture as JSON in the root attributes `model_config` and
// `training_config`; keras.models.load_model rebuilds every layer from it. A `Lambda` layer carries
// its function as base64 of marshalled Python bytecode ("function": [code, defaults, closure],
// "function_type": "lambda"), which loading unmarshals and runs; "function_type": "function" and a
// "module" naming anything outside Keras make it import and call that module's code. Keras 3's own
// format writes a lambda as {"class_name": "__lambda__", "config": {"code": ...}}.
//
// We never unmarshal, import or run anything: this only finds where a config names code.
#pragma once

#include <string>
#include <vector>

namespace ckpt {

struct KerasCodeReference {
  std::string attribute;   // "model_config" | "training_config"
  std::string layer;       // the layer's config name ("scale_by_two"), else its class name
  std::string class_name;  // "Lambda", "__lambda__", or the class whose config names a module
  std::string reason;      // "marshalled Python bytecode (function_type 'lambda')", ...
};

// Every code reference in `json_text` (the attribute's value). Text that is not JSON yields one
// reference naming the attribute: a config loading cannot be checked is not a config we can vouch for.
std::vector<KerasCodeReference> find_keras_code(const std::string& attribute, const std::string& json_text);

}  // namespace ckpt
