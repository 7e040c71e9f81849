// The pins of a loaded config with this binary's LibTorch facts. It lives in ckpt_torch because it
// calls torch_runtime; it includes no Torch header, so it costs nothing to compile.
#include "verifier/pins.h"
#include "verifier/torch_runtime.h"

namespace ckpt {

TorchFacts current_torch_facts() {
  return TorchFacts{libtorch_version(), built_with_cuda()};
}

Result<nlohmann::json> compute_pins(const PilotConfig& config, const std::string& initial_weights) {
  return compute_pins(pin_inputs_of(config, initial_weights), current_torch_facts());
}

}  // namespace ckpt
