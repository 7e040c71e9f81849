// report.json: the drill's verdict with every number behind it. The measurement key names are an
// API: `plan` reads measurements.memory and measurements.timings.* to size a long run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "verifier/drill/drill.h"

namespace ckpt {

nlohmann::json drill_report_json(const DrillOutcome& outcome, const DrillOptions& options);

// Writes report.json and report.html into `dir` (created if missing), each atomically.
Status write_drill_report(const std::string& dir, const nlohmann::json& report);

}  // namespace ckpt
