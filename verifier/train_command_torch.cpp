// PLACEHOLDER until the lead engineer lands the real train command.
#include <CLI/CLI.hpp>
#include "verifier/commands.h"
namespace ckpt {
namespace {
class TrainCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override { return app.add_subcommand("train", "train the reference workload"); }
  int run() override { return kExitUsage; }
};
}  // namespace
std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }
}  // namespace ckpt
