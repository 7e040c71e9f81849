// `ckptcheck pin --config F [--initial-weights W] [--out pins.json] [--json]`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "verifier/cli/commands.h"
#include "verifier/pins/pins.h"

namespace ckpt {

// What the command needs from outside the torch-free library: a config loader and the LibTorch
// facts. Tests pass fakes; make_pin_command() passes load_pilot_config and current_torch_facts().
struct PinEnvironment {
  std::function<Result<PinInputs>(const std::string& config_path)> load_inputs;
  TorchFacts torch;
};

std::unique_ptr<Command> make_pin_command(PinEnvironment environment);
std::unique_ptr<Command> make_pin_command();  // pin_command_wiring.cpp

}  // namespace ckpt
