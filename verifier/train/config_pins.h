// The pins of the built-in workload's config: what a PilotConfig resolves to as the inputs of
// verifier/pins (model, data files, preprocessing, seeds). Lives above the pins so that the
// torch-free verifier, which only compares pins, never links the workload's config and yaml-cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "fixtures/pilot_config.h"
#include "verifier/pins/pins.h"

namespace ckpt {

PinInputs pin_inputs_of(const PilotConfig& config, const std::string& initial_weights = "");
// compute_pins(pin_inputs_of(config), current_torch_facts()).
Result<nlohmann::json> compute_pins(const PilotConfig& config, const std::string& initial_weights = "");

}  // namespace ckpt
