// A training run the drill started and may kill: one local process (a program, or `ckptcheck
// launch` and its ranks) or a Slurm job step. The drill's watchers (verifier/drill/save_watch.h)
// and waits only use this, so every launcher gets the same kill points and deadlines.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "verifier/process/child_exit.h"

namespace ckpt {

class RunningProgram {
 public:
  virtual ~RunningProgram() = default;
  // SIGKILL of every rank, now; returns once none is left (for a Slurm step: once Slurm no longer
  // lists the step), so a relaunch never overlaps the killed run.
  virtual ChildExit kill_and_reap() = 0;
  // Waits for the run to end; past the deadline it is killed as above and reported timed out.
  // `tick`, if set, is called about every 200 ms while it runs.
  virtual ChildExit wait(double timeout_seconds, const std::function<void()>& tick) = 0;
  // Reaps the run if it has ended, without blocking.
  virtual bool try_reap(ChildExit* exit) = 0;
  virtual bool running() const = 0;
  // The process below which every rank runs on this machine (its memory can be sampled from
  // /proc); -1 when the ranks run elsewhere (a Slurm step's tasks are children of slurmd).
  virtual pid_t local_pid() const = 0;
  // What was started, for messages: "pid 1234", "Slurm step 12.3".
  virtual std::string label() const = 0;
};

}  // namespace ckpt
