// What a drill has established so far: its checks, its failure lines and its progress line. Every
// phase of every drill mode (from scratch, live) reports through this one object, so report.json,
// the JUnit file, the history line and the terminal say the same thing.
#pragma once

#include <string>

#include "base/status.h"
#include "verifier/drill/drill.h"

namespace ckpt {

class Progress;

struct DrillRecord {
  DrillOutcome out;
  Progress* progress = nullptr;
  long long phases_done = 0, phases_total = 1;

  // Advances the progress line (a terminal only) to the next phase.
  void phase(const std::string& what);
  // Records a check; a failed one (not a skipped one) adds `failure` (default: "name: detail") to
  // the failure lines.
  void add_check(DrillCheck check, const std::string& failure = "");
  void fail(const std::string& message, const std::string& mode);
  // The outcome once the phases returned `status`: exit 2 with its message, else 1 when a check
  // failed, else 0; bit_identical only for a pass; the progress line cleared.
  DrillOutcome finish(const Status& status, double wall_seconds, bool identical);
};

// " (after-save kill)", " (live)", or "" for the whole drill: what a failure line ends with.
std::string mode_suffix(const std::string& mode);

}  // namespace ckpt
