// The pins of a loaded config with the LibTorch facts this build was configured with. Torch-free:
// the version and CUDA flag come from CMake (find_package(Torch)), so `pin` and `verify
// --against-env` never load LibTorch.
#include "verifier/pins/pins.h"
#include "verifier/pins/torch_build_info.h"

namespace ckpt {

TorchFacts current_torch_facts() {
  return TorchFacts{libtorch_version(), built_with_cuda()};
}

Result<nlohmann::json> compute_pins(const PilotConfig& config, const std::string& initial_weights) {
  return compute_pins(pin_inputs_of(config, initial_weights), current_torch_facts());
}

}  // namespace ckpt
