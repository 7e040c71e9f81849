#include "verifier/cli/pin_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/file_io.h"

namespace ckpt {
namespace {

class PinCommand : public Command {
 public:
  explicit PinCommand(PinEnvironment environment) : environment_(std::move(environment)) {}

  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("pin", "print the pins (revisions, dependencies, container) of a config");
    sub->add_option("--config", config_path_, "pilot config (YAML)")->required();
    sub->add_option("--initial-weights", initial_weights_, "file the model is initialised from");
    sub->add_option("--out", out_path_, "also write the pins as JSON here (atomically)");
    sub->add_flag("--json", json_, "print one JSON object instead of a table");
    return sub;
  }

  int run() override {
    auto inputs = environment_.load_inputs(config_path_);
    if (!inputs.is_ok()) return fail(inputs.status());
    inputs->initial_weights = initial_weights_;
    auto pins = compute_pins(*inputs, environment_.torch);
    if (!pins.is_ok()) return fail(pins.status());
    if (!out_path_.empty()) {
      Status written = write_file_atomically(out_path_, pins->dump(2) + "\n");
      if (!written.is_ok()) return fail(written);
    }
    const std::string text = json_ ? pins->dump(2) + "\n" : pins_table(*pins);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }

 private:
  static int fail(const Status& status) { return report_failure("pin", status); }

  PinEnvironment environment_;
  std::string config_path_;
  std::string initial_weights_;
  std::string out_path_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> make_pin_command(PinEnvironment environment) {
  return std::make_unique<PinCommand>(std::move(environment));
}

}  // namespace ckpt
