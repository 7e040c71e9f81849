// `ckptcheck launch --nproc-per-node P [--master-port N] -- train ...`: runs P ranks of this same
// binary under torchrun's environment contract (verifier/launch.h). Exit 0 iff every rank exited 0.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "verifier/cli/commands.h"
#include "verifier/process/launch.h"

namespace ckpt {
namespace {

class LaunchCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    sub_ =
        app.add_subcommand("launch", "Run P ranks of a ckptcheck command (RANK, WORLD_SIZE, MASTER_* set)");
    sub_->add_option("--nproc-per-node", o_.nproc_per_node, "ranks to start")
        ->required()
        ->check(CLI::Range(1, 1024));
    sub_->add_option("--master-port", o_.master_port, "rendezvous port (default: a free loopback port)")
        ->check(CLI::Range(0, 65535));
    sub_->add_option("--grace", o_.grace_seconds,
                     "seconds before the ranks left are SIGKILLed once one fails")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    // Everything after `--` is the rank command (CLI11 treats it as positionals).
    sub_->add_option("command", rest_, "the ckptcheck command each rank runs, after --");
    return sub_;
  }

  int run() override {
    std::vector<std::string> rest = rest_;
    if (rest.empty()) {
      std::fprintf(stderr, "ckptcheck launch: no command after --\n");
      return kExitUsage;
    }
    auto exe = current_executable();
    if (!exe.is_ok()) {
      std::fprintf(stderr, "ckptcheck launch: %s\n", exe.status().to_string().c_str());
      return kExitUsage;
    }
    o_.argv = {*exe};
    o_.argv.insert(o_.argv.end(), rest.begin(), rest.end());
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
  CLI::App* sub_ = nullptr;
  std::vector<std::string> rest_;
  LaunchOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_launch_command() {
  return std::make_unique<LaunchCommand>();
}

}  // namespace ckpt
