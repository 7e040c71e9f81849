// `ckptcheck diff A B [--rtol R] [--atol A] [--json]`: parses the flags and does what diff_checkpoints does
// (verifier/tensors/checkpoint_diff.h). Exit 0: identical within tolerance; 1: a tensor differs or
// exists on one side only (or a side's bytes are damaged); 2: bad flags or an unreadable source.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/release_at_exit.h"
#include "verifier/cli/commands.h"
#include "verifier/tensors/checkpoint_diff.h"

namespace ckpt {
namespace {

class DiffCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("diff", "Compare two checkpoints or tensor files tensor by tensor");
    sub->add_option("a", path_a_, "checkpoint dir or root, tensor file or safetensors index")->required();
    sub->add_option("b", path_b_, "checkpoint dir or root, tensor file or safetensors index")->required();
    sub->add_option("--rtol", tolerance_.rtol, "relative tolerance (floating tensors)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--atol", tolerance_.atol, "absolute tolerance (floating tensors)")
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--json", json_, "print one JSON object instead of the table");
    return sub;
  }

  int run() override {
    // diff_checkpoints, with the sides kept past the output: the exit releases them.
    // --json answers in JSON also when a side cannot be read, naming that side.
    const auto fail = [this](const std::string& path, const Status& st) {
      return json_ ? report_failure_json("diff", path, st) : report_failure("diff", st);
    };
    auto a = TensorSource::open(path_a_);
    if (!a.is_ok()) return fail(path_a_, a.status());
    auto b = TensorSource::open(path_b_);
    if (!b.is_ok()) return fail(path_b_, b.status());
    auto diff = diff_sources(*a, *b, tolerance_);
    if (!diff.is_ok()) return fail(path_a_, diff.status());
    const std::string out =
        json_ ? checkpoint_diff_to_json(*diff).dump() + "\n" : checkpoint_diff_to_text(*diff);
    std::fwrite(out.data(), 1, out.size(), stdout);
    release_at_exit(std::move(*a));
    release_at_exit(std::move(*b));
    return diff->identical ? kExitOk : kExitCheckFailed;
  }

 private:
  std::string path_a_;
  std::string path_b_;
  Tolerance tolerance_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> make_diff_command() {
  return std::make_unique<DiffCommand>();
}

}  // namespace ckpt
