// The kill modes' kill point held by the file system, so the SIGKILL lands at it however fast the
// program is and however busy the machine (docs/drill.md, "The kill point"). The subject's run dir
// (its metrics file, its checkpoint dir, its logs) is mounted through ckptcheck-faultfs, armed
// before the program starts:
//   after-save   the write that completes the step-N checkpoint event line is served, then held;
//   during-save  the first change under the checkpoint dir once the run announced step N - every and
//                logged a step past it (the step-N save's first request) is served, then held.
// While the program sleeps in that request the drill reads what it wrote (below the mount: the
// mount's only thread is the one holding), sends SIGKILL, and only then lets the request reply; a
// process killed inside a FUSE request it is waiting on dies before its next instruction. The mount
// is undone and the files put back at the run dir, so every later phase reads the same paths as
// without it. Where it cannot be used (no FUSE, ranks under `launch`, Slurm,
// CKPTCHECK_KILL_GATE=off) the save watch of save_watch.h kills as soon as it sees the point.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "faultfs/fault_mount.h"
#include "verifier/drill/drill.h"
#include "verifier/drill/program_contract.h"
#include "verifier/drill/save_watch.h"

namespace ckpt {

// "" when a kill mode's subject can have its kill point held; otherwise why not, in words.
std::string held_kill_point_unavailable(const DrillOptions& options, const std::string& faultfs_program);

class HeldKillPoint {
 public:
  // Mounts ckptcheck-faultfs over `dir` (an empty directory); the files live in `dir`.held/backing.
  static Result<std::unique_ptr<HeldKillPoint>> mount(const std::string& faultfs_program,
                                                      const std::string& dir);
  ~HeldKillPoint();  // finish(), its Status ignored: never a mount left behind
  HeldKillPoint(const HeldKillPoint&) = delete;
  HeldKillPoint& operator=(const HeldKillPoint&) = delete;

  // Arm before the program starts, so no program is fast enough to pass the point unarmed.
  // after-save: the checkpoint event of `step`; during-save: the save after the one of `step`.
  Status arm(const ProgramRun& run, bool after_save, int64_t step);

  // Waits for the held request, then SIGKILLs `child` while it sleeps in it, releases it and reaps.
  // The outcome reads as kill_after_checkpoint's or kill_during_save's.
  Result<WatchOutcome> kill_when_held(RunningProgram& child, const ProgramRun& run, bool after_save,
                                      int64_t step, double timeout_seconds, const StepObserver& on_step);

  // The same watch with the request held by another mount's gate (`gate`, armed by the caller), whose
  // path for the checkpoint dir is `ckpt_on_gate` ("/" when the mount is the checkpoint dir): the
  // log is still read below this mount.
  Result<WatchOutcome> kill_when_held_by(const faultfs::FaultMount& gate, const std::string& ckpt_on_gate,
                                         RunningProgram& child, const ProgramRun& run, bool after_save,
                                         int64_t step, double timeout_seconds, const StepObserver& on_step);

  // during-save's arming moment held on its own (the gate's `after-step`): the write of the first step
  // line past the checkpoint event of `step`. For a during-save kill whose checkpoint dir is on
  // another mount (power-loss-mid-save): the drill arms that mount's `first-change` while the
  // program sleeps here.
  Status arm_after_step(const ProgramRun& run, int64_t step);
  // Waits for the held request, runs `while_held`, then lets the request reply (always); true. False
  // when the program ended first, or ran past `timeout_seconds` (then it is SIGKILLed, `ended`
  // timed_out): the point was never reached, `ended` says how it ended.
  Result<bool> release_when_held(RunningProgram& child, double timeout_seconds,
                                 const std::function<Status()>& while_held, ChildExit* ended);

  // Unmounts and puts the run's files back at the run dir. Idempotent.
  Status finish();

  // `path` under the run dir, as it lies in the backing dir (read there while a request is held:
  // the mount's only thread is asleep in it).
  std::string below(const std::string& path) const;

 private:
  HeldKillPoint(std::string dir, std::string held) : dir_(std::move(dir)), held_(std::move(held)) {}
  std::string relative(const std::string& path) const;

  std::string dir_, held_;
  std::unique_ptr<faultfs::FaultMount> mount_;
};

}  // namespace ckpt
