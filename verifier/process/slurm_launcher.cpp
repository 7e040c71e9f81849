#include "verifier/process/slurm_launcher.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <thread>

#include "base/file_io.h"
#include "base/seconds_since.h"

namespace ckpt {

namespace {

using Clock = std::chrono::steady_clock;

// How long a Slurm client command (squeue, scancel, scontrol) may take before it is an error.
constexpr double kClientTimeoutSeconds = 30;
// How long a killed step may stay listed before the kill is reported as unconfirmed.
constexpr double kStepGoneTimeoutSeconds = 60;

struct CommandOutput {
  ChildExit exit;
  std::string out;
};

Result<CommandOutput> run_command(const std::vector<std::string>& argv, double timeout_seconds,
                                  const std::string& stderr_log = "/dev/null") {
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.search_path = true;
  spawn.pipe_stdout = true;
  spawn.stderr_log = stderr_log;
  CKPT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(spawn));
  const ChildExit e = child.wait(timeout_seconds);
  return CommandOutput{e, child.captured_stdout()};
}

}  // namespace

Result<std::vector<std::pair<int64_t, std::string>>> list_slurm_steps(int64_t job) {
  CKPT_ASSIGN_OR_RETURN(CommandOutput r, run_command({"squeue", "--noheader", "--steps", "--jobs",
                                                      std::to_string(job), "--format=%i %j"},
                                                     kClientTimeoutSeconds));
  if (!r.exit.ok())
    return Status::io_error("squeue --steps --jobs " + std::to_string(job) + ": " + r.exit.describe());
  std::vector<std::pair<int64_t, std::string>> steps;
  std::istringstream lines(r.out);
  std::string id, name;
  while (lines >> id >> name) {
    const size_t dot = id.find('.');
    if (dot == std::string::npos || id.substr(0, dot) != std::to_string(job)) continue;
    const std::string step = id.substr(dot + 1);
    if (step.empty() || step.find_first_not_of("0123456789") != std::string::npos) continue;  // batch, extern
    steps.emplace_back(std::stoll(step), name);
  }
  return steps;
}

std::string slurm_node_address(const std::string& node) {
  auto r = run_command({"scontrol", "--oneliner", "show", "node", node}, kClientTimeoutSeconds);
  if (!r.is_ok() || !r->exit.ok()) return node;
  static const std::regex addr("(^|\\s)NodeAddr=(\\S+)");
  std::smatch m;
  if (std::regex_search(r->out, m, addr)) return m[2].str();
  return node;
}

// ---- allocation -------------------------------------------------------------------------------

Result<SlurmAllocation> SlurmAllocation::acquire(int nodes, const std::vector<std::string>& extra_args,
                                                 double timeout_seconds, const std::string& log) {
  if (const char* job = std::getenv("SLURM_JOB_ID")) {
    const std::string id = job;
    if (id.empty() || id.size() > 18 || id.find_first_not_of("0123456789") != std::string::npos)
      return Status::invalid_argument("SLURM_JOB_ID: expected a job id, got '" + id + "'");
    return SlurmAllocation(std::stoll(id), false);
  }
  // --immediate: an allocation that cannot be granted in time is refused by salloc itself.
  const int wait = std::max(1, static_cast<int>(timeout_seconds));
  std::vector<std::string> argv = {"salloc", "--no-shell", "--immediate=" + std::to_string(wait),
                                   "--job-name=ckptcheck-drill", "--nodes=" + std::to_string(nodes)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  CKPT_ASSIGN_OR_RETURN(CommandOutput r, run_command(argv, timeout_seconds + kClientTimeoutSeconds, log));
  auto read = read_small_file(log, 1u << 20);
  const std::string said = read.is_ok() ? *read : std::string();
  static const std::regex granted("Granted job allocation ([0-9]+)");
  std::smatch m;
  std::string::const_iterator from = said.begin();
  std::string job;
  while (std::regex_search(from, said.end(), m, granted)) {
    job = m[1].str();
    from = m.suffix().first;
  }
  if (!r.exit.ok() || job.empty())
    return Status::io_error("salloc --nodes=" + std::to_string(nodes) + " gave no allocation within " +
                            std::to_string(wait) + " s (" + r.exit.describe() + "): " + log_tail(log, 300));
  return SlurmAllocation(std::stoll(job), true);
}

SlurmAllocation::SlurmAllocation(SlurmAllocation&& other) noexcept
    : job_id_(other.job_id_), owned_(other.owned_) {
  other.owned_ = false;
}

SlurmAllocation::~SlurmAllocation() {
  if (owned_) (void)run_command({"scancel", std::to_string(job_id_)}, kClientTimeoutSeconds);
}

// ---- step -------------------------------------------------------------------------------------

Result<std::unique_ptr<SlurmStep>> SlurmStep::start(const SlurmAllocation& job, const SlurmStepRequest& q) {
  if (q.nodes < 1 || q.tasks_per_node < 1)
    return Status::invalid_argument("a Slurm step needs >= 1 node and >= 1 task per node");
  if (q.name.empty() || q.name.find_first_of(" \t\n") != std::string::npos)
    return Status::invalid_argument("a Slurm step needs a name without spaces, got '" + q.name + "'");
  SpawnOptions spawn = q.program;
  // Every count is given explicitly: inside an allocation srun would otherwise take the job's
  // own SLURM_NTASKS and friends from the environment as its defaults.
  spawn.argv = {"srun", "--jobid=" + std::to_string(job.job_id()), "--job-name=" + q.name,
                "--nodes=" + std::to_string(q.nodes),
                "--ntasks=" + std::to_string(q.nodes * q.tasks_per_node),
                "--ntasks-per-node=" + std::to_string(q.tasks_per_node),
                // Steps of one drill run side by side (the reference beside the subject) and may
                // hold more ranks than the allocation has CPUs.
                "--overlap", "--overcommit",
                // One rank failing ends the step, as a failing rank ends a torchrun job.
                "--kill-on-bad-exit=1",
                // And one rank finishing ends the others 60 s later: a rank still running then is
                // stuck (LaunchOptions::finish_window_seconds says how), and the drill never hangs.
                "--wait=60", "--export=ALL"};
  spawn.argv.insert(spawn.argv.end(), q.extra_args.begin(), q.extra_args.end());
  spawn.argv.insert(spawn.argv.end(), q.program.argv.begin(), q.program.argv.end());
  spawn.search_path = true;
  spawn.pipe_stdout = false;
  CKPT_ASSIGN_OR_RETURN(ChildProcess srun, ChildProcess::spawn(spawn));
  std::unique_ptr<SlurmStep> step(new SlurmStep(std::move(srun), job.job_id(), q.name));
  // The step's id: Slurm lists it once it runs. A step that ends first needs none (it cannot be
  // killed any more); one still unlisted at the deadline is pending, and an error. srun is left
  // unreaped for the caller's wait(): has_ended(), not running(), says that it ended (a step that
  // ran a second, as a one-rank control run does, was waited on for the whole minute, then failed).
  const auto start = Clock::now();
  while (!step->srun_.has_ended()) {
    auto steps = list_slurm_steps(job.job_id());
    if (steps.is_ok())
      for (const auto& [id, name] : *steps)
        if (name == q.name) step->step_ = id;
    if (step->step_ >= 0) break;
    if (seconds_since(start) > q.start_timeout_seconds) {
      step->srun_.send_signal(SIGTERM);  // srun withdraws a pending step request on SIGTERM
      ChildExit ignored;
      for (int i = 0; i < 50 && !step->srun_.try_reap(&ignored); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      step->srun_.kill_and_reap();
      return Status::io_error(
          "Slurm step " + q.name + " of job " + std::to_string(job.job_id()) + " did not start within " +
          std::to_string(static_cast<int>(q.start_timeout_seconds)) +
          " s (pending: more tasks than CPUs, or nodes busy?): " + log_tail(q.program.stderr_log, 300));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return step;
}

SlurmStep::~SlurmStep() {
  if (srun_.running()) kill_and_reap();
}

std::string SlurmStep::step_label() const {
  return step_ < 0 ? "" : std::to_string(job_) + "." + std::to_string(step_);
}

std::string SlurmStep::label() const {
  return step_ < 0 ? "Slurm step ? of job " + std::to_string(job_) : "Slurm step " + step_label();
}

ChildExit SlurmStep::kill_and_reap() {
  if (!srun_.running()) return {};
  if (step_ < 0) return srun_.kill_and_reap();
  (void)run_command({"scancel", "--signal=KILL", step_label()}, kClientTimeoutSeconds);
  // srun exits once Slurm reports its tasks dead; past the deadline it is SIGKILLed itself.
  ChildExit e = srun_.wait(kClientTimeoutSeconds);
  // Confirmed only when Slurm no longer lists the step: then no task of it runs anywhere.
  const auto start = Clock::now();
  while (seconds_since(start) < kStepGoneTimeoutSeconds) {
    auto steps = list_slurm_steps(job_);
    bool listed = false;
    if (steps.is_ok())
      for (const auto& s : *steps) listed = listed || s.first == step_;
    if (steps.is_ok() && !listed) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The tasks died of SIGKILL; srun itself reports that as exit 137.
  e.exited = false;
  e.exit_code = -1;
  e.signaled = true;
  e.signal = SIGKILL;
  return e;
}

ChildExit SlurmStep::wait(double timeout_seconds, const std::function<void()>& tick) {
  const auto start = Clock::now();
  ChildExit e;
  while (!srun_.try_reap(&e)) {
    if (!srun_.running()) return e;
    if (seconds_since(start) >= timeout_seconds) {
      e = kill_and_reap();
      e.timed_out = true;
      return e;
    }
    if (tick) tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return e;
}

bool SlurmStep::try_reap(ChildExit* exit) {
  return srun_.try_reap(exit);
}

}  // namespace ckpt
