// How a drill starts each run of the program it drills, and waits for it: a local child (the
// program itself, or `ckptcheck launch` and its P ranks, so a SIGKILL of the launcher takes every
// rank with it) or a Slurm job step (every task one rank). The built-in workload is `ckptcheck train`
// plus the flags only it has. Every wait has the drill's child deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/drill/drill.h"
#include "verifier/drill/program_contract.h"
#include "verifier/process/running_program.h"
#include "verifier/process/slurm_launcher.h"

namespace ckpt {

class Progress;

// Which world a run has: the subject's (reference, subject) or the resumed run's (control,
// resumed, faults).
enum class RunShape { kSubject, kResumed };

class ProgramLauncher {
 public:
  // `config_path`: the built-in workload's config (absolute); "" for a program of the user's.
  ProgramLauncher(const DrillOptions& options, std::string exe, std::string config_path);

  // --launcher slurm: the allocation every step runs in (the current job, or one taken with salloc
  // and released when this launcher dies). A no-op for the local launcher.
  Status prepare(const std::string& work_dir);

  // Starts one run under the contract; logs go to DIR/stdout.log and DIR/stderr.log, and the
  // built-in workload's eval output and summary into DIR.
  Result<std::unique_ptr<RunningProgram>> start(const ProgramRun& run, const std::string& dir, RunShape shape,
                                                const std::vector<std::string>& extra = {});

  // Waits for a run; on a terminal the progress line shows `what` and the run's last logged step
  // of `total_steps`, read from its metrics file as it grows.
  ChildExit wait(RunningProgram& child, const std::string& what, const std::string& metrics,
                 Progress* progress, int64_t total_steps) const;
  // The same, and an error naming the run and its stderr when it did not exit 0.
  Status wait_ok(RunningProgram& child, const std::string& what, const std::string& dir, Progress* progress,
                 int64_t total_steps) const;

  bool slurm() const { return options_.launcher == "slurm"; }
  const SlurmAllocation* allocation() const { return allocation_ ? &*allocation_ : nullptr; }

 private:
  bool built_in() const { return options_.command.empty(); }

  const DrillOptions& options_;
  std::string exe_, config_path_;
  std::optional<SlurmAllocation> allocation_;
  long long steps_started_ = 0;
};

// "--launcher", "--nodes", ... that make no sense together, or for this launcher.
Status check_launcher_options(const DrillOptions& options);

}  // namespace ckpt
