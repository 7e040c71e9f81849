#include "verifier/tensors/state_step.h"

namespace ckpt {

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

}  // namespace ckpt
