// Why a subject run never reached its kill point, said in words a user can act on: the program
// failed or was never found, stopped before step N, never saved, saved without announcing, or
// announced its checkpoints where the during-save watch cannot see them. Each cause is read from
// what the run left: its exit, its metrics log, its checkpoint dir and its stderr.
#pragma once

#include <cstdint>
#include <string>

#include "verifier/process/child_exit.h"

namespace ckpt {

struct MissedKillPoint {
  std::string mode;  // "after-save" | "during-save"
  int64_t save_at = 0;
  int64_t steps = 0;       // CKPTCHECK_STEPS the run was given
  int64_t save_every = 0;  // CKPTCHECK_SAVE_EVERY
  std::string metrics, ckpt_dir, stderr_log;
  ChildExit exit;
  double timeout_seconds = 0;
  // The first metrics line (of this run or another run of the program) that breaks the contract,
  // as read_metrics_log words it; "" if none. It comes first: it is why nothing was recognised.
  std::string bad_metrics;
};

// One message (no trailing newline) naming the cause, and what to change.
std::string explain_missed_kill_point(const MissedKillPoint& run);

}  // namespace ckpt
