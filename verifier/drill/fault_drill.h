// The fault drills: a copy of a real checkpoint is damaged the way storage and crashes damage
// checkpoints (truncated, a flipped bit, a file missing, a file left from an older save), the program
// is relaunched from it, and what it did is classified: refused, or resumed silently (diverging or
// not). Only ever copies inside the drill's own work dir are touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/drill/drill.h"
#include "verifier/drill/drill_record.h"
#include "verifier/process/child_exit.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

// What a single-file checkpoint is verified with, beside it: its seal `<file>.ckptcheck.seal.json`
// and the seal's signature `.sig`, those that exist (none for a directory: its seal lies inside).
std::vector<std::string> checkpoint_companions(const std::string& checkpoint);

// Copies `checkpoint` (a file or a directory, with its companions above) into `dir` and damages the copy;
// `older` is the previous checkpoint (the stale-file fault takes a file from it). Returns what was done, or
// "" when the fault does not apply (drop-file on a one-file checkpoint). `copy` receives the copy's path.
Result<std::string> damage_checkpoint_copy(const std::string& fault, const CheckpointEvent& checkpoint,
                                           const CheckpointEvent& older, const std::string& dir,
                                           std::string* copy);

// What the golden values a fault run is held against are.
struct FaultGolden {
  const std::vector<StepRecord>* steps = nullptr;
  const StateSnapshot* final_state = nullptr;  // null when there is none to compare
  int64_t final_step = 0;
  Tolerance tolerance;
  bool built_in = false;  // what would have caught a silent fault differs for ckptcheck's own checkpoints
  std::string name = "the reference";  // what the golden values are, in the verdict's words
};

// Classifies the relaunch from a damaged copy (its exit and its metrics file) and records the
// fault_<name> check: a fault accepted silently fails the drill. `ckpt_dir`: the run's
// CKPTCHECK_CKPT_DIR, which relative checkpoint paths in its metrics are read from.
void record_fault_run(DrillRecord& record, const std::string& fault, const std::string& damage,
                      const ChildExit& exit, const std::string& metrics, const std::string& ckpt_dir,
                      const std::string& stderr_log, const FaultGolden& golden);

}  // namespace ckpt
