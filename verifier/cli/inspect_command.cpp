// `ckptcheck inspect PATH [--json] [--errors] [--stats] [--tensor NAME]`: parses the flags and calls
// inspect_checkpoint (verifier/tensors/inspect_report.h). Exit 0: every recorded hash and CRC-32
// agrees; 1: the bytes are damaged (a hash or CRC mismatch, a corrupt or torn file); 2: bad flags,
// unreadable path, unknown tensor, or a file we cannot read. A pickle's globals are never imported
// or called; dangerous ones get a WARNING line, and the exit code stays 0 (forensics: `verify` is the
// gate that refuses them).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/exit_on_termination.h"
#include "base/release_at_exit.h"
#include "distributed/mpi_world.h"
#include "verifier/check/what_to_pass.h"
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
    sub->add_flag("--errors", errors_only_,
                  "print only the verdict and the errors (with --json: path, kind, ok, errors, issues)");
    sub->add_flag("--stats", options_.stats, "add min, max, mean, L2 norm and NaN/Inf counts per tensor");
    sub->add_option("--tensor", options_.tensor, "inspect only this tensor");
    sub->add_flag("--distributed", distributed_,
                  "one of many tasks started by mpirun or srun --mpi=pmix: the tasks split the tensors by "
                  "size, gather their hashes and statistics through MPI, and rank 0 prints the one report");
    return sub;
  }

  int run() override {
    std::unique_ptr<MpiWorld> world;
    if (distributed_) {
      auto started = MpiWorld::init();
      if (!started.is_ok()) return report_failure("inspect", started.status());
      world = std::move(*started);
      options_.distributed = world.get();
    }
    auto report = inspect_checkpoint(path_, options_);
    if (!report.is_ok() && world) {
      // The other tasks may be waiting in a gather this one will never reach: end the job.
      std::fprintf(stderr, "ckptcheck inspect: rank %d of %d on %s: %s\n", world->rank(), world->world_size(),
                   world->host().c_str(), report.status().to_string().c_str());
      world->abort(2);
    }
    if (!report.is_ok()) {
      const Status failed = with_what_to_pass(path_, "inspect", report.status());
      return json_ ? report_failure_json("inspect", path_, failed) : report_failure("inspect", failed);
    }
    const int code = report->ok() ? kExitOk : kExitCheckFailed;
    // Every task built the same report from the gathered results; rank 0 prints it.
    if (world && world->rank() != 0) {
      exit_with_on_termination(code);
      return code;
    }
    const std::string out = json_ ? inspect_report_to_json(*report, errors_only_).dump() + "\n"
                                  : inspect_report_to_text(*report, errors_only_);
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (world) exit_with_on_termination(code);
    release_at_exit(std::move(*report));  // the source's records: the exit releases them at once
    return code;
  }

 private:
  std::string path_;
  bool json_ = false;
  bool errors_only_ = false;
  bool distributed_ = false;
  InspectOptions options_;
};

}  // namespace

std::unique_ptr<Command> make_inspect_command() {
  return std::make_unique<InspectCommand>();
}

}  // namespace ckpt
