// The pins a training run records in every manifest, and the drift check made before resuming.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures/pilot_config.h"
#include "formats/status.h"

namespace ckpt {

nlohmann::json compute_run_pins(const PilotConfig& config);

// Refuses (kInvalidArgument -> exit 2) a resume whose blocking pins differ, naming every field,
// unless each is in `allowed`; overrides are written to `extra["allowed_drift"]` so the next
// manifest records them. Dependency and container changes are printed as warnings.
Status check_resume_drift(const nlohmann::json& recorded, const nlohmann::json& current,
                          const std::vector<std::string>& allowed, nlohmann::json* extra);

}  // namespace ckpt
