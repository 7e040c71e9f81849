// The storage faults of the fault catalogue (fault_catalogue.h): the subject writes its checkpoints
// through ckptcheck-faultfs (docs/faultfs.md), mounted over its CKPTCHECK_CKPT_DIR, and the fault
// happens below the process, where a SIGKILL cannot reach:
//
//   power-loss           SIGKILL at the step-N checkpoint event, then everything not durable is
//                        dropped; the announced checkpoint must survive whole, and the relaunch from it
//                        match the reference
//   power-loss-mid-save  SIGKILL and power loss at the first name the step-N save creates; the
//                        checkpoint announced before it must survive whole, and the relaunch from it match
//   disk-full            ENOSPC from half of the step-N save's bytes (the reference's step-N checkpoint)
//                        on; the save must fail visibly (non-zero exit or no announcement), nothing
//                        incomplete be announced, the checkpoint before stay whole, and a relaunch with
//                        the space back resume from it and match
//   read-error           SIGKILL at the step-N checkpoint event, then EIO on every file of it; the
//                        relaunch must exit non-zero, or fall back to an older whole checkpoint and match
//
// The kill points are held by the file system where the kill modes' are (held_kill_point.h): the
// subject's run dir on a ckptcheck-faultfs mount of its own, beside the checkpoint dir's.
//
// The relaunch gets the subject's checkpoint dir as the fault left it, with CKPTCHECK_RESUME naming
// the last checkpoint announced before the fault (what a job restarter reading the log would pass);
// the step it actually resumed from is its first logged step less one. Each fault records one check
// fault_<name> and one FaultResult; a failure names what was lost and the call that would have kept
// it, from the file system's journal.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "verifier/drill/drill.h"
#include "verifier/drill/drill_record.h"
#include "verifier/drill/fault_drill.h"

namespace ckpt {

class ProgramLauncher;

// Whether this machine can mount ckptcheck-faultfs: `program` exists, /dev/fuse opens read-write
// and fusermount3 is there. Otherwise kInvalidArgument saying what is needed (the drill exits 2).
Status check_storage_faults_usable(const std::string& faultfs_program);

// The ckptcheck-faultfs beside `ckptcheck_exe` (the build and the install put them side by side).
std::string faultfs_program_beside(const std::string& ckptcheck_exe);

struct StorageFaultSetup {
  DrillRecord* record = nullptr;
  ProgramLauncher* launcher = nullptr;
  const DrillOptions* options = nullptr;
  std::string faultfs_program;
  std::string dir;  // the fault's own dir: backing/, faultfs-state/, ckpt/ (the mount), subject/, resumed/
  int64_t n = 0, save_every = 0, steps = 0;  // N, the save interval, N+K
  FaultGolden golden;                        // the reference's steps and final state
  uint64_t reference_save_bytes = 0;         // disk-full: bytes of the reference's step-N checkpoint
};

// Runs one storage fault (a subject, the fault, the relaunch) and records its verdict. An error
// only when the drill itself could not do its part (the mount, a subject that never reached N).
Status run_storage_fault(const std::string& fault, const StorageFaultSetup& setup);

}  // namespace ckpt
