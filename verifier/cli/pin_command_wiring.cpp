// The real wiring of `ckptcheck pin`: the pilot config loader and this binary's LibTorch facts.
// Torch-free: current_torch_facts() reads what CMake recorded about LibTorch.
#include "fixtures/pilot_config.h"
#include "verifier/cli/pin_command.h"
#include "verifier/train/config_pins.h"

namespace ckpt {

std::unique_ptr<Command> make_pin_command() {
  PinEnvironment environment;
  environment.load_inputs = [](const std::string& path) -> Result<PinInputs> {
    CKPT_ASSIGN_OR_RETURN(PilotConfig config, load_pilot_config(path));
    return pin_inputs_of(config);
  };
  environment.torch = current_torch_facts();
  return make_pin_command(std::move(environment));
}

}  // namespace ckpt
