// The drift check a training process makes before it resumes from a checkpoint.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// Refuses (kInvalidArgument -> exit 2) a resume whose blocking pins (config, model revision,
// dataset revision, seeds) differ, naming every differing field, unless each is in `allowed`.
// Overrides are added to `extra["allowed_drift"]` so the next manifest records them; dependency and
// container changes are printed as warnings and recorded in `extra["drift_warnings"]`.
Status check_resume_drift(const nlohmann::json& recorded, const nlohmann::json& current,
                          const std::vector<std::string>& allowed, nlohmann::json* extra);

}  // namespace ckpt
