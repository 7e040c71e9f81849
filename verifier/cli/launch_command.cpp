// `ckptcheck launch [--nnodes N --node-rank R --master-addr A --master-port P] --nproc-per-node P
// -- PROGRAM [ARGS]`: runs P ranks of any program (searched in PATH like a shell does) under
// torchrun's environment contract (verifier/process/launch.h); when PROGRAM is a ckptcheck
// subcommand (`-- train ...`) the ranks run this same binary. Debian's torchrun crashes at start
// under Python 3.11, so this is the launcher users there have. Exit 0 iff every rank exited 0.
//
// Inside a Slurm step the variables come from Slurm's: `srun ckptcheck launch -- PROGRAM` makes
// every task one rank (RANK = SLURM_PROCID, ...; launch replaces itself with PROGRAM, so a
// `scancel --signal=KILL` of the step hits the rank itself), and `srun --ntasks-per-node=1
// ckptcheck launch --nproc-per-node P -- PROGRAM` starts P ranks per node with nnodes, node rank,
// MASTER_ADDR and MASTER_PORT taken from the step. --no-slurm ignores SLURM_* (the drill's local runs).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "base/open_file_limit.h"
#include "verifier/cli/commands.h"
#include "verifier/process/launch.h"
#include "verifier/process/program_path.h"
#include "verifier/process/slurm_launcher.h"

namespace ckpt {
namespace {

class LaunchCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    sub_ = app.add_subcommand("launch",
                              "Run P ranks of a program with torchrun's environment (RANK, WORLD_SIZE, ...)");
    sub_->add_option("--nproc-per-node", o_.nproc_per_node,
                     "ranks to start on this node (required outside a Slurm step; under srun without it, "
                     "each task is one rank)")
        ->check(CLI::Range(1, 1024));
    sub_->add_flag("--no-slurm", no_slurm_, "ignore SLURM_* variables even inside a Slurm step");
    sub_->add_option("--nnodes", o_.nnodes, "nodes taking part (each runs its own launch)")
        ->capture_default_str()
        ->check(CLI::Range(1, 65536));
    sub_->add_option("--node-rank", o_.node_rank, "this node's rank, 0..nnodes-1")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    sub_->add_option("--master-addr", o_.master_addr, "rank 0's node address")->capture_default_str();
    sub_->add_option("--master-port", o_.master_port,
                     "rendezvous port (default: a free loopback port; required with --nnodes > 1)")
        ->check(CLI::Range(0, 65535));
    sub_->add_option("--grace", o_.grace_seconds,
                     "seconds before the ranks left are SIGKILLed once one fails")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub_->add_option("--finish-window", o_.finish_window_seconds,
                     "seconds the other ranks have to exit once one has exited 0, before they are SIGKILLed")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    // Everything after `--` is the rank command (CLI11 treats it as positionals).
    sub_->add_option("command", rest_, "the program each rank runs, after -- (or a ckptcheck subcommand)");
    return sub_;
  }

  bool take_program(const std::vector<std::string>& program) override {
    rest_ = program;
    return true;
  }

  int run() override {
    std::vector<std::string> rest = rest_;
    if (rest.empty()) {
      std::fprintf(stderr, "ckptcheck launch: no command after --\n");
      return kExitUsage;
    }
    const bool subcommand = is_subcommand(rest[0]);
    auto program = subcommand ? current_executable() : find_program(rest[0]);
    if (!program.is_ok()) {
      std::fprintf(stderr, "ckptcheck launch: %s\n", program.status().to_string().c_str());
      return kExitUsage;
    }
    o_.argv = {*program};
    // A ckptcheck subcommand keeps its name as the first argument of this binary.
    o_.argv.insert(o_.argv.end(), rest.begin() + (subcommand ? 0 : 1), rest.end());
    std::optional<SlurmTask> task;
    if (!no_slurm_) {
      auto found = slurm_task_from_environment([](const char* name) { return std::getenv(name); });
      if (!found.is_ok()) {
        std::fprintf(stderr, "ckptcheck launch: %s\n", found.status().to_string().c_str());
        return kExitUsage;
      }
      task = *found;
    }
    const bool nproc_given = sub_->count("--nproc-per-node") > 0;
    if (task && !nproc_given) return exec_as_slurm_task(*task);
    if (!nproc_given) {
      std::fprintf(stderr,
                   "ckptcheck launch: --nproc-per-node is required outside a Slurm job step (under srun "
                   "without it, each task is one rank)\n");
      return kExitUsage;
    }
    if (task && sub_->count("--nnodes") == 0) {
      auto from_slurm =
          launch_options_from_slurm(*task, o_.nproc_per_node, slurm_node_address(task->first_node));
      if (!from_slurm.is_ok()) {
        std::fprintf(stderr, "ckptcheck launch: %s\n", from_slurm.status().to_string().c_str());
        return kExitUsage;
      }
      from_slurm->argv = o_.argv;
      from_slurm->grace_seconds = o_.grace_seconds;
      from_slurm->finish_window_seconds = o_.finish_window_seconds;
      o_ = *from_slurm;
    }
    auto outcome = launch_ranks(o_);
    if (!outcome.is_ok()) {
      std::fprintf(stderr, "ckptcheck launch: %s\n", outcome.status().to_string().c_str());
      return kExitUsage;
    }
    for (const std::string& line : outcome->report_lines()) std::fprintf(stderr, "%s\n", line.c_str());
    if (outcome->all_ok()) return kExitOk;
    // A rank's own exit code when it is the only one that failed on its own (usage error: 2).
    for (const RankExit& r : outcome->ranks)
      if (r.exit.exited && r.exit.exit_code != 0 && !r.stopped_by_launcher) return r.exit.exit_code;
    return kExitCheckFailed;
  }

 private:
  bool is_subcommand(const std::string& name) const {
    for (const CLI::App* s : sub_->get_parent()->get_subcommands({})) {
      if (s->get_name() == name) return true;
    }
    return false;
  }

  // This task of a Slurm step becomes the rank: torchrun's variables from Slurm's, then exec.
  int exec_as_slurm_task(const SlurmTask& task) {
    const bool omp_set = std::getenv("OMP_NUM_THREADS") != nullptr;
    for (const std::string& v :
         slurm_task_torchrun_environment(task, slurm_node_address(task.first_node), omp_set)) {
      const size_t eq = v.find('=');
      ::setenv(v.substr(0, eq).c_str(), v.substr(eq + 1).c_str(), 1);
    }
    std::vector<char*> argv;
    for (std::string& a : o_.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    restore_open_file_limit();  // the rank runs under the limits this task was given
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "ckptcheck launch: %s: exec: %s\n", o_.argv[0].c_str(), std::strerror(errno));
    return kExitUsage;
  }

  CLI::App* sub_ = nullptr;
  std::vector<std::string> rest_;
  LaunchOptions o_;
  bool no_slurm_ = false;
};

}  // namespace

std::unique_ptr<Command> make_launch_command() {
  return std::make_unique<LaunchCommand>();
}

}  // namespace ckpt
