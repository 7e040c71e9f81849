#include "verifier/pins/run_pins.h"

#include <cstdio>
#include <set>

#include "verifier/pins/drift.h"

namespace ckpt {

Status check_resume_drift(const nlohmann::json& recorded, const nlohmann::json& current,
                          const std::vector<std::string>& allowed, nlohmann::json* extra) {
  const DriftReport report =
      compare_pins(recorded, current, std::set<std::string>(allowed.begin(), allowed.end()));
  std::string blocking;
  for (const DriftItem& item : report.items) {
    const std::string line = item.describe();
    switch (item.severity) {
      case DriftSeverity::kBlocking: blocking += (blocking.empty() ? "" : "; ") + line; break;
      case DriftSeverity::kOverridden:
        (*extra)["allowed_drift"].push_back(line);
        std::fprintf(stderr, "warning: resuming despite drift (allowed): %s\n", line.c_str());
        break;
      case DriftSeverity::kWarning:
        (*extra)["drift_warnings"].push_back(line);
        std::fprintf(stderr, "warning: environment drift: %s\n", line.c_str());
        break;
    }
  }
  if (!blocking.empty()) {
    return Status::invalid_argument("refusing to resume: pins differ: " + blocking +
                                    " (override with --allow-drift FIELD)");
  }
  return Status::ok();
}

}  // namespace ckpt
