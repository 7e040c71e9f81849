// The drill history: one JSON line per drill appended to a file the user keeps (`--history F`),
// so a nightly drill shows its trend: restore time, checkpoint size, snapshot and resume time,
// the largest difference per metric, the verdicts. Entries are built from report.json, the
// drill's API, and the HTML report charts them.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// {"time", "mode", "program", "verdict", "exit_code", "save_at", "resume_steps", "checkpoint_bytes",
//  "snapshot_seconds", "restore_seconds", "resume_seconds", "max_abs": {metric: value}, "failures"};
// a value the report does not hold is null.
nlohmann::json drill_history_entry(const nlohmann::json& report, std::time_t now);

// The entries of a history file; none when it does not exist. A torn last line (a drill killed
// while appending) is dropped; any other line that is not a JSON object is kCorruption naming the
// file and line.
Result<std::vector<nlohmann::json>> read_drill_history(const std::string& path);

// Appends one line: under a lock, the file is rewritten beside itself (its torn last line dropped, a
// whole one given its newline) and renamed over itself, so a crash mid-write never leaves a line
// that breaks the next drill, and concurrent drills never lose or interleave lines.
Status append_drill_history(const std::string& path, const nlohmann::json& entry);

}  // namespace ckpt
