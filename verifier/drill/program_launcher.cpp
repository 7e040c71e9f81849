#include "verifier/drill/program_launcher.h"

#include <unistd.h>

#include <algorithm>

#include "base/file_io.h"
#include "base/progress.h"
#include "verifier/drill/save_watch.h"
#include "verifier/process/child_process.h"

namespace ckpt {

Status check_launcher_options(const DrillOptions& o) {
  if (o.launcher != "local" && o.launcher != "slurm")
    return Status::invalid_argument("`launcher`: expected local or slurm, got '" + o.launcher + "'");
  if (o.launcher != "slurm" && (o.nodes != 1 || o.resume_nodes != 0 || !o.slurm_args.empty()))
    return Status::invalid_argument("`nodes`, `resume_nodes` and `slurm_args` need `launcher` slurm");
  if (o.nodes < 1 || o.resume_nodes < 0)
    return Status::invalid_argument("`nodes` must be >= 1 and `resume_nodes` >= 1 (got " +
                                    std::to_string(o.nodes) + ", " + std::to_string(o.resume_nodes) + ")");
  return Status::ok();
}

ProgramLauncher::ProgramLauncher(const DrillOptions& options, std::string exe, std::string config_path)
    : options_(options), exe_(std::move(exe)), config_path_(std::move(config_path)) {}

Status ProgramLauncher::prepare(const std::string& work_dir) {
  if (!slurm() || allocation_) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(
      SlurmAllocation job,
      SlurmAllocation::acquire(std::max(options_.nodes, options_.resume_nodes), options_.slurm_args,
                               options_.slurm_start_timeout_seconds, work_dir + "/salloc.log"));
  allocation_.emplace(std::move(job));
  return Status::ok();
}

Result<std::unique_ptr<RunningProgram>> ProgramLauncher::start(const ProgramRun& run, const std::string& dir,
                                                               RunShape shape,
                                                               const std::vector<std::string>& extra) {
  const DrillOptions& o = options_;
  CKPT_RETURN_IF_ERROR(make_directory(run.ckpt_dir));
  const int nproc = shape == RunShape::kSubject || o.resume_nproc == 0 ? o.nproc : o.resume_nproc;
  // What every rank runs: a ckptcheck subcommand, or a program `launch` finds in PATH.
  std::vector<std::string> rank_argv;
  if (built_in()) {
    rank_argv = {"train",  "--config",   config_path_,  "--shards",  std::to_string(o.shards), "--format",
                 o.format, "--eval-out", dir + "/eval", "--summary", dir + "/summary.json"};
    rank_argv.insert(rank_argv.end(), extra.begin(), extra.end());
  } else {
    rank_argv = substitute_placeholders(o.command, run);
  }
  SpawnOptions spawn;
  if (slurm()) {
    spawn.argv = {exe_, "launch", "--"};
  } else if (nproc > 0) {
    spawn.argv = {exe_, "launch", "--no-slurm", "--nproc-per-node", std::to_string(nproc), "--"};
  } else if (built_in()) {
    spawn.argv = {exe_};
  } else {
    spawn.search_path = true;
  }
  spawn.argv.insert(spawn.argv.end(), rank_argv.begin(), rank_argv.end());
  spawn.env = contract_environment(run);
  spawn.env.push_back("CKPTCHECK_NO_PROGRESS=1");
  if (run.resume.empty()) spawn.unset_env.push_back(kEnvResume);
  spawn.stdout_log = dir + "/stdout.log";
  spawn.stderr_log = dir + "/stderr.log";
  if (!slurm()) {
    CKPT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(spawn));
    return std::unique_ptr<RunningProgram>(new ChildProcess(std::move(child)));
  }
  SlurmStepRequest step;
  step.nodes = shape == RunShape::kSubject || o.resume_nodes == 0 ? std::max(o.nodes, 1) : o.resume_nodes;
  step.tasks_per_node = std::max(nproc, 1);
  step.extra_args = o.slurm_args;
  step.name =
      "ckptcheck-" + run.role + "-" + std::to_string(::getpid()) + "-" + std::to_string(++steps_started_);
  step.program = spawn;
  step.start_timeout_seconds = o.slurm_start_timeout_seconds;
  CKPT_ASSIGN_OR_RETURN(std::unique_ptr<SlurmStep> started, SlurmStep::start(*allocation_, step));
  return std::unique_ptr<RunningProgram>(std::move(started));
}

ChildExit ProgramLauncher::wait(RunningProgram& child, const std::string& what, const std::string& metrics,
                                Progress* progress, int64_t total_steps) const {
  if (!progress || !progress->enabled()) return child.wait(options_.child_timeout_seconds, nullptr);
  MetricsTail tail(metrics);
  const auto show = [&] {
    CheckpointEvent ignored;
    tail.poll_for_checkpoint(-1, &ignored);
    progress->update("drill: " + what + ", step", std::max<int64_t>(0, tail.last_step()), total_steps);
  };
  const ChildExit exit = child.wait(options_.child_timeout_seconds, show);
  // Once more after the exit: a run that logs its last steps between two ticks (a fast resumed
  // run) ends its line on the step it reached, not on the last tick's.
  show();
  return exit;
}

Status ProgramLauncher::wait_ok(RunningProgram& child, const std::string& what, const std::string& dir,
                                Progress* progress, int64_t total_steps) const {
  const ChildExit e = wait(child, what, dir + "/metrics.jsonl", progress, total_steps);
  if (!e.ok())
    return Status::io_error(what + " failed (" + e.describe() + "): " + log_tail(dir + "/stderr.log"));
  return Status::ok();
}

}  // namespace ckpt
