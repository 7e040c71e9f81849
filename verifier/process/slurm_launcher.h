// Runs a program as a Slurm job step and kills it the way Slurm means it: `srun` starts the step,
// `scancel --signal=KILL JOB.STEP` SIGKILLs every task at once (a job-level scancel sends SIGTERM
// first and waits KillWait; killing srun itself orphans the tasks), and `squeue --steps` confirms the
// step is gone before anyone relaunches. Inside an allocation (sbatch, salloc: SLURM_JOB_ID set) the
// steps run in it; from a login node the launcher takes its own allocation with `salloc --no-shell`
// and gives it back at the end. Every Slurm command has a deadline: a step or an allocation that
// stays pending (more tasks than CPUs) is an error naming what Slurm said, never a hang.
// Torch-free; talks to Slurm only through its commands.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/process/child_process.h"
#include "verifier/process/running_program.h"

namespace ckpt {

// The job the steps run in.
class SlurmAllocation {
 public:
  // SLURM_JOB_ID's job when set; else a new allocation of `nodes` nodes (`salloc --no-shell
  // --immediate=T -N nodes EXTRA...`), released (scancel) when this object dies. `log` receives
  // salloc's messages.
  static Result<SlurmAllocation> acquire(int nodes, const std::vector<std::string>& extra_args,
                                         double timeout_seconds, const std::string& log);
  SlurmAllocation(SlurmAllocation&& other) noexcept;
  SlurmAllocation& operator=(SlurmAllocation&&) = delete;
  SlurmAllocation(const SlurmAllocation&) = delete;
  SlurmAllocation& operator=(const SlurmAllocation&) = delete;
  ~SlurmAllocation();

  int64_t job_id() const { return job_id_; }
  bool owned() const { return owned_; }  // taken by this process (and released by it)

 private:
  SlurmAllocation(int64_t job, bool owned) : job_id_(job), owned_(owned) {}
  int64_t job_id_ = 0;
  bool owned_ = false;
};

struct SlurmStepRequest {
  int nodes = 1;
  int tasks_per_node = 1;
  std::vector<std::string> extra_args;  // given to srun before the program (--slurm-args)
  std::string name;                     // the step's name (-J), unique in the job: how it is found
  SpawnOptions program;                 // argv (run by every task), env, logs
  double start_timeout_seconds = 60;    // a step not running by then is killed and an error
};

// One running step.
class SlurmStep : public RunningProgram {
 public:
  static Result<std::unique_ptr<SlurmStep>> start(const SlurmAllocation& job,
                                                  const SlurmStepRequest& request);
  ~SlurmStep() override;  // a step still running is killed (scancel --signal=KILL) and reaped

  ChildExit kill_and_reap() override;
  ChildExit wait(double timeout_seconds, const std::function<void()>& tick) override;
  bool try_reap(ChildExit* exit) override;
  bool running() const override { return srun_.running(); }
  // "Slurm step 12.3" ("Slurm step ? of job 12" when it ended before Slurm listed it).
  pid_t local_pid() const override { return -1; }  // the tasks run under slurmd, not below srun
  std::string label() const override;

  // "JOB.STEP", or "" when the step ended before Slurm listed it.
  std::string step_label() const;

 private:
  SlurmStep(ChildProcess srun, int64_t job, std::string name)
      : srun_(std::move(srun)), job_(job), name_(std::move(name)) {}
  ChildProcess srun_;
  int64_t job_ = 0;
  int64_t step_ = -1;
  std::string name_;
};

// The address of a Slurm node as Slurm resolves it (`scontrol show node NAME`: its NodeAddr); the
// name itself when scontrol cannot say.
std::string slurm_node_address(const std::string& node);

// The ids of the steps of `job` Slurm lists now, with their names ("12.3 ckptcheck-subject").
Result<std::vector<std::pair<int64_t, std::string>>> list_slurm_steps(int64_t job);

}  // namespace ckpt
