// What a drill has established so far: its checks, its failure lines and its progress line. Every
// phase of every drill mode (from scratch, live) reports through this one object, so report.json,
// the JUnit file, the history line and the terminal say the same thing.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "verifier/drill/drill.h"

namespace ckpt {

class Progress;

struct DrillRecord {
  DrillOutcome out;
  Progress* progress = nullptr;
  long long phases_done = 0, phases_total = 1;
  std::chrono::steady_clock::time_point last_check = std::chrono::steady_clock::now();

  // Advances the progress line (a terminal only) to the next phase.
  void phase(const std::string& what);
  // Records a check; a failed one (not a skipped one) adds `failure` (default: "name: detail") to
  // the failure lines.
  void add_check(DrillCheck check, const std::string& failure = "");
  // Sets check.seconds (when unset) to the time since the previous check, and starts the next.
  void stamp(DrillCheck& check);
  void fail(const std::string& message, const std::string& mode);
  // The outcome once the phases returned `status`: exit 2 with its message, else 1 when a check
  // failed, else 0; bit_identical only for a pass; the progress line cleared.
  DrillOutcome finish(const Status& status, double wall_seconds, bool identical);
};

// The resumed_from check's words: "resumed from step_4.pt (step 4); first logged step 5, expected 5",
// and for a relaunch that logged step 1 from a checkpoint of a later step, "started from scratch:
// first logged step 1, expected 5 (the relaunch was given CKPTCHECK_RESUME=step_4.pt, step 4)".
std::string resumed_from_words(const std::string& checkpoint_name, int64_t step, int64_t first_logged);

// The one cause a failed drill's report leads with, before the diverging metrics, "" when its
// checks name none: a fresh start (resumed_from), state the checkpoint lacks (resume_state, the
// judgement `verify` makes; only where it failed the drill or the restore failed), a component not
// restored (final_state's not_restored evidence), in that order; where only faults failed, the
// first failed fault.
std::string drill_headline(const DrillOutcome& out);

// The check of a fault that cannot apply to this checkpoint (drop-file of a one-file checkpoint, a
// stale-file with no older checkpoint): nothing was tested, so it is skipped, never a pass.
DrillCheck fault_not_applicable(const std::string& fault, const std::string& why);

// " (after-save kill)", " (live)", or "" for the whole drill: what a failure line ends with.
std::string mode_suffix(const std::string& mode);

}  // namespace ckpt
