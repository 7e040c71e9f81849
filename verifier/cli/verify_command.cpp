// `ckptcheck verify PATH`: runs the checks of checkpoint_verifier.h and prints the report.
// Exit 0: every check passed; 1: the checkpoint failed a check; 2: bad flags or PATH is not a
// readable checkpoint or root, or (--against-env) a blocking pin differs from this environment.
// Torch-free: the LibTorch facts in the pins come from the build configuration.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "base/progress.h"
#include "fixtures/pilot_config.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/cli/commands.h"
#include "verifier/pins/container_fingerprint.h"
#include "verifier/pins/pins.h"
#include "verifier/train/config_pins.h"

namespace ckpt {
namespace {

class VerifyCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("verify", "Verify a checkpoint (or a root's latest / every checkpoint) offline");
    sub->add_option("path", path_,
                    "checkpoint dir (step_XXXXXXXX), checkpoint root, sealed or DCP dir, HF Trainer folder "
                    "or tensor file")
        ->required();
    sub->add_flag("--json", json_, "print one JSON object instead of the summary");
    sub->add_option("--jobs", options_.jobs, "shards hashed in parallel (default: all cores)")
        ->check(CLI::Range(1, 1024));
    sub->add_flag("--quick", options_.quick,
                  "structure, headers, pickles, resume state and sizes only; no payload byte is read");
    sub->add_flag("--weights-only", options_.weights_only,
                  "a foreign checkpoint (DCP dir, torch.save file, HF folder) may hold model weights only");
    sub->add_flag("--all", all_,
                  "verify every committed checkpoint of the root and list uncommitted leftovers");
    sub->add_option("--pubkey", options_.pubkey_path,
                    "require a signature that verifies under this Ed25519 key (manifest.json.sig, or the "
                    "seal's .sig for other kinds); a checkpoint without one fails");
    sub->add_option("--allow-global", options_.allowed_globals,
                    "accept this pickle global (MODULE.NAME, repeatable) after reviewing it; every other "
                    "global outside torch.load(weights_only=True)'s allowlist fails verify");
    sub->add_flag("--against-env", against_env_,
                  "compare the checkpoint's pins with this environment (dependencies, container)");
    sub->add_option("--config", config_path_,
                    "with --against-env: also compare config, model and dataset revisions with this config");
    return sub;
  }

  int run() override {
    if (!config_path_.empty() && !against_env_)
      return usage_error(Status::invalid_argument("--config needs --against-env"));
    if (against_env_) {
      auto pins = current_pins();
      if (!pins.is_ok()) return usage_error(pins.status());
      options_.current_pins = *pins;
    }
    Progress progress;
    if (progress.enabled()) {
      options_.on_progress = [&progress](uint64_t done, uint64_t total) {
        progress.update("verify bytes", static_cast<long long>(done), static_cast<long long>(total));
      };
    }
    if (all_) {
      auto report = verify_root(path_, options_);
      progress.finish();
      if (!report.is_ok()) return usage_error(report.status());
      print(report_to_json(*report), report_to_text(*report));
      return report->ok() ? kExitOk : kExitCheckFailed;
    }
    auto report = verify_path(path_, options_);
    progress.finish();
    if (!report.is_ok()) return usage_error(report.status());
    print(report_to_json(*report), report_to_text(*report));
    if (report->ok()) return kExitOk;
    // Refusing an environment is a usage outcome, like `train --resume`; damage is a check failure.
    bool only_drift = true;
    for (const auto& e : report->errors) only_drift = only_drift && e.code == verify_code::kPinsDrift;
    return only_drift ? kExitUsage : kExitCheckFailed;
  }

 private:
  Result<nlohmann::json> current_pins() const {
    if (!config_path_.empty()) {
      CKPT_ASSIGN_OR_RETURN(PilotConfig config, load_pilot_config(config_path_));
      return compute_pins(config);
    }
    // Only ckptcheck's own checkpoints record pins: any other kind is refused before reading it.
    CKPT_ASSIGN_OR_RETURN(VerifyTarget target, resolve_verify_target(path_));
    VerifyOptions wants_pins;
    wants_pins.current_pins = nlohmann::json::object();
    CKPT_RETURN_IF_ERROR(refuse_unhonoured_options(target.kind, wants_pins));
    // Environment only: the thread count is the checkpoint's own (a run setting, not the machine's).
    const std::string& dir = target.path;
    CKPT_ASSIGN_OR_RETURN(Manifest manifest, read_manifest_file(dir));
    const int threads = manifest.config.value("threads", 1);
    return nlohmann::json{{"dependencies", dependency_versions(current_torch_facts())},
                          {"container_fingerprint", container_fingerprint(threads)}};
  }

  int usage_error(const Status& status) const {
    std::fprintf(stderr, "ckptcheck verify: %s\n", status.to_string().c_str());
    return kExitUsage;
  }

  void print(const nlohmann::json& json, const std::string& text) const {
    const std::string out = json_ ? json.dump() + "\n" : text;
    std::fwrite(out.data(), 1, out.size(), stdout);
  }

  std::string path_;
  bool json_ = false;
  bool all_ = false;
  bool against_env_ = false;
  std::string config_path_;
  VerifyOptions options_;
};

}  // namespace

std::unique_ptr<Command> make_verify_command() {
  return std::make_unique<VerifyCommand>();
}

}  // namespace ckpt
