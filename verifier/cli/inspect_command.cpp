// `ckptcheck inspect PATH [--json] [--stats] [--tensor NAME]`: parses the flags and calls
// inspect_checkpoint (verifier/tensors/inspect_report.h). Exit 0: every recorded hash and CRC-32
// agrees; 1: the bytes are damaged (a hash or CRC mismatch, a corrupt or torn file); 2: bad flags,
// unreadable path, unknown tensor, or a file we cannot read. A pickle's globals are never imported
// or called; dangerous ones get a WARNING line, and the exit code stays 0 (forensics: `verify` is the
// gate that refuses them).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "verifier/cli/commands.h"
#include "verifier/tensors/inspect_report.h"

namespace ckpt {
namespace {

class InspectCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("inspect", "List the tensors, hashes and metadata of a checkpoint or tensor file");
    sub->add_option("path", path_,
                    "checkpoint dir or root, tensor file (native, safetensors, HDF5, .pt) or "
                    "model.safetensors.index.json")
        ->required();
    sub->add_flag("--json", json_, "print one JSON object instead of the table");
    sub->add_flag("--stats", options_.stats, "add min, max, mean, L2 norm and NaN/Inf counts per tensor");
    sub->add_option("--tensor", options_.tensor, "inspect only this tensor");
    return sub;
  }

  int run() override {
    auto report = inspect_checkpoint(path_, options_);
    if (!report.is_ok()) return report_failure("inspect", report.status());
    const std::string out =
        json_ ? inspect_report_to_json(*report).dump() + "\n" : inspect_report_to_text(*report);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return report->ok() ? kExitOk : kExitCheckFailed;
  }

 private:
  std::string path_;
  bool json_ = false;
  InspectOptions options_;
};

}  // namespace

std::unique_ptr<Command> make_inspect_command() {
  return std::make_unique<InspectCommand>();
}

}  // namespace ckpt
