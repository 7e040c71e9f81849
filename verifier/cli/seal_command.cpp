// `ckptcheck seal PATH`: writes a hashed seal beside a checkpoint (verifier/check/seal.h says what
// it holds and why), so `verify PATH` can later name the file, tensor and byte range that changed.
// Exit 0: sealed; 2: PATH unreadable, a path inside leaves it, or a seal already exists.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/progress.h"
#include "verifier/check/seal.h"
#include "verifier/cli/commands.h"

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
    sub->add_flag("--json", json_, "print one JSON object instead of the summary");
    return sub;
  }

  int run() override {
    Progress progress;
    if (progress.enabled()) {
      options_.on_progress = [&progress](uint64_t done, uint64_t total) {
        progress.update("seal bytes", static_cast<long long>(done), static_cast<long long>(total));
      };
    }
    auto summary = seal_checkpoint(path_, options_);
    progress.finish();
    if (!summary.is_ok()) {
      std::fprintf(stderr, "ckptcheck seal: %s\n", summary.status().to_string().c_str());
      return kExitUsage;
    }
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
  SealOptions options_;
};

}  // namespace

std::unique_ptr<Command> make_seal_command() {
  return std::make_unique<SealCommand>();
}

}  // namespace ckpt
