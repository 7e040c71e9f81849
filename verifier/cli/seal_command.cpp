// `ckptcheck seal PATH`: writes a hashed seal beside a checkpoint (verifier/check/seal.h says what
// it holds and why), so `verify PATH` can later name the file, tensor and byte range that changed.
// Exit 0: sealed; 2: PATH unreadable, a path inside leaves it, or a seal already exists.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/progress.h"
#include "distributed/mpi_world.h"
#include "verifier/check/seal.h"
#include "verifier/cli/commands.h"
#include "verifier/cli/option_flags.h"

namespace ckpt {
namespace {

class SealCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand(
        "seal", "Write a hashed seal (every file's and tensor's SHA-256) beside any checkpoint, for verify");
    sub->add_option("path", path_, "a checkpoint directory (DCP, HF Trainer, ...) or a single file")
        ->required();
    sub->add_flag("--integrity-json", options_.write_integrity,
                  "also write Megatron-Core's integrity.json into the directory");
    sub->add_option("--jobs", options_.jobs, "files hashed in parallel (default: all cores)")
        ->check(CLI::Range(1, 1024));
    sub->add_option(
           "--piece-mib", piece_mib_,
           "seal files larger than this many MiB piece by piece too, so verify --distributed can split "
           "them (default: sized for ~2,048 pieces, 1-64 MiB)")
        ->check(CLI::Range(1, 4096));
    sub->add_flag("--json", json_, "print one JSON object instead of the summary");
    sub->add_flag("--distributed", distributed_,
                  "one of many tasks started by mpirun or srun --mpi=pmix: every task seals its share of the "
                  "files, the seals are gathered through MPI and rank 0 writes the one seal file");
    return sub;
  }

  int run() override {
    options_.piece_bytes = piece_mib_ << 20;
    std::unique_ptr<MpiWorld> world;
    if (distributed_) {
      auto started = MpiWorld::init();
      if (!started.is_ok()) {
        std::fprintf(stderr, "ckptcheck seal: %s\n", started.status().to_string().c_str());
        return kExitUsage;
      }
      world = std::move(*started);
      options_.distributed = world.get();
    }
    Progress progress;
    if (progress.enabled() && (!world || world->rank() == 0)) {
      options_.on_progress = [&progress](uint64_t done, uint64_t total) {
        progress.update("seal bytes", static_cast<long long>(done), static_cast<long long>(total));
      };
    }
    auto summary = seal_checkpoint(path_, options_);
    progress.finish();
    if (!summary.is_ok()) {
      if (world) {
        // The other tasks may be waiting in a gather this one will never reach: end the job.
        std::fprintf(stderr, "ckptcheck seal: rank %d of %d on %s: %s\n", world->rank(), world->world_size(),
                     world->host().c_str(),
                     with_flags(summary.status().to_string(), seal_field_flags()).c_str());
        world->abort(kExitUsage);
      }
      std::fprintf(stderr, "ckptcheck seal: %s\n",
                   with_flags(summary.status().to_string(), seal_field_flags()).c_str());
      if (json_)
        write_failure_json(path_, kExitUsage, summary.status(),
                           with_flags(summary.status().message(), seal_field_flags()));
      return kExitUsage;
    }
    if (world && world->rank() != 0) return kExitOk;  // rank 0 prints the one summary
    if (json_) {
      nlohmann::json j = {{"seal", summary->seal_path},
                          {"files", summary->files},
                          {"tensors", summary->tensors},
                          {"bytes", summary->bytes},
                          {"unread", summary->unread}};
      if (!summary->integrity_path.empty()) j["integrity"] = summary->integrity_path;
      std::printf("%s\n", j.dump().c_str());
      return kExitOk;
    }
    std::printf("sealed %s: %zu files, %zu tensors, %llu bytes\n", summary->seal_path.c_str(), summary->files,
                summary->tensors, static_cast<unsigned long long>(summary->bytes));
    if (!summary->integrity_path.empty()) std::printf("wrote %s\n", summary->integrity_path.c_str());
    for (const auto& u : summary->unread)
      std::printf("note: tensors not listed, sealed by file hash only: %s\n", u.c_str());
    return kExitOk;
  }

 private:
  std::string path_;
  bool json_ = false;
  bool distributed_ = false;
  uint64_t piece_mib_ = 0;  // 0: seal_piece_bytes chooses
  SealOptions options_;
};

}  // namespace

const FieldFlags& seal_field_flags() {
  static const FieldFlags flags = {
      {"write_integrity", "--integrity-json"}, {"jobs", "--jobs"}, {"distributed", "--distributed"}};
  return flags;
}

std::unique_ptr<Command> make_seal_command() {
  return std::make_unique<SealCommand>();
}

}  // namespace ckpt
