#include "verifier/run_pins.h"

#include <cstdio>

#include "formats/sha256.h"

namespace ckpt {

nlohmann::json compute_run_pins(const PilotConfig& config) {
  return {{"config_sha256", sha256_hex(config.resolved().dump())}};
}

Status check_resume_drift(const nlohmann::json& recorded, const nlohmann::json& current,
                          const std::vector<std::string>& allowed, nlohmann::json* extra) {
  std::string blocking;
  for (const char* field : {"config_sha256", "model_revision", "dataset_revision"}) {
    if (!recorded.contains(field) || !current.contains(field) || recorded[field] == current[field]) continue;
    const std::string line = std::string(field) + ": checkpoint " + recorded[field].dump() + ", now " + current[field].dump();
    if (std::find(allowed.begin(), allowed.end(), field) != allowed.end()) {
      (*extra)["allowed_drift"].push_back(line);
      std::fprintf(stderr, "warning: resuming despite drift (allowed): %s\n", line.c_str());
      continue;
    }
    blocking += (blocking.empty() ? "" : "; ") + line;
  }
  if (!blocking.empty()) {
    return Status::invalid_argument("refusing to resume: pins differ: " + blocking + " (override with --allow-drift FIELD)");
  }
  return Status::ok();
}

}  // namespace ckpt
