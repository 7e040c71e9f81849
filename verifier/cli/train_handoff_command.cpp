// `train` as the torch-free `ckptcheck` lists it. main() hands `ckptcheck train ...` to
// ckptcheck-train before parsing, so this entry exists for `--help`; its flags are documented by
// `ckptcheck train --help`, which the training binary answers.
#include <CLI/CLI.hpp>

#include "verifier/cli/commands.h"

namespace ckpt {
namespace {

class TrainHandoffCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("train", "Train the built-in workload, checkpointing and resuming");
    sub->allow_extras();
    return sub;
  }
  int run() override { return kExitUsage; }  // unreachable: main() execs the training binary first
};

}  // namespace

std::unique_ptr<Command> make_train_handoff_command() {
  return std::make_unique<TrainHandoffCommand>();
}

}  // namespace ckpt
