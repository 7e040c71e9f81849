// The drill as JUnit XML, for the test reporters of CI systems (Jenkins, GitLab, GitHub Actions):
// one <testcase> per check of report.json, a <failure> with the check's message for a failed
// one, and one <error> testcase when the drill could not run (exit 2). Built from report.json, the
// drill's API, so it says exactly what the report says.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace ckpt {

std::string drill_junit_xml(const nlohmann::json& report);

// Writes it atomically.
Status write_drill_junit(const std::string& path, const nlohmann::json& report);

}  // namespace ckpt
