// `ckptcheck verify PATH`: runs the checks of checkpoint_verifier.h and prints the report.
// Exit 0: every check passed; 1: the checkpoint failed a check; 2: bad flags or PATH is not a
// readable checkpoint or root, or (--against-env) a blocking pin differs from this environment.
// Torch-free: the LibTorch facts in the pins come from the build configuration.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "base/exit_on_termination.h"
#include "base/progress.h"
#include "distributed/mpi_world.h"
#include "distributed/step_gather.h"
#include "fixtures/pilot_config.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/pickle_gate.h"
#include "verifier/cli/commands.h"
#include "verifier/cli/option_flags.h"
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
                    "global outside torch.load(weights_only=True)'s allowlist and the kind's trust profile "
                    "(DCP, Megatron, TorchScript classes used as data) fails verify");
    sub->add_option("--allow-globals-from", allowed_globals_file_,
                    "accept the pickle globals this file lists (one MODULE.NAME per line, # comments): a "
                    "team's reviewed list, kept in its repository");
    sub->add_flag("--against-env", against_env_,
                  "compare the checkpoint's pins with this environment (dependencies, container)");
    sub->add_flag("--distributed", distributed_,
                  "one of many tasks started by mpirun or srun: every task plans the same scan units, "
                  "hashes its share and all-gathers the results through MPI; rank 0 prints the one report");
    sub->add_option("--config", config_path_,
                    "with --against-env: also compare config, model and dataset revisions with this config");
    return sub;
  }

  int run() override {
    if (!config_path_.empty() && !against_env_)
      return usage_error(Status::invalid_argument("--config needs --against-env"));
    if (!allowed_globals_file_.empty()) {
      auto listed = read_allowed_globals_file(allowed_globals_file_);
      if (!listed.is_ok()) return usage_error(listed.status());
      options_.allowed_globals.insert(options_.allowed_globals.end(), listed->begin(), listed->end());
    }
    if (against_env_) {
      auto pins = current_pins();
      if (!pins.is_ok()) return usage_error(pins.status());
      options_.current_pins = *pins;
    }
    std::unique_ptr<MpiWorld> world;
    if (distributed_) {
      if (all_)
        return usage_error(Status::invalid_argument("--distributed verifies one checkpoint, not --all"));
      auto started = MpiWorld::init();
      if (!started.is_ok()) return usage_error(started.status());
      world = std::move(*started);
      options_.distributed = world.get();
      options_.on_share = [this](size_t units, uint64_t bytes) {
        share_units_ = units;
        share_bytes_ = bytes;
      };
    }
    Progress progress;
    if (progress.enabled() && (!world || world->rank() == 0)) {
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
    if (world) return finish_distributed(*world, report);
    if (!report.is_ok()) return usage_error(report.status());
    print(report_to_json(*report), report_to_text(*report));
    return exit_code_of(*report);
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
    // The config only: verify checks the shards and reports what is wrong with them.
    CKPT_ASSIGN_OR_RETURN(Manifest manifest, read_manifest_fields(dir));
    const int threads = manifest.config.value("threads", 1);
    return nlohmann::json{{"dependencies", dependency_versions(current_torch_facts())},
                          {"container_fingerprint", container_fingerprint(threads)}};
  }

  static int exit_code_of(const VerifyReport& report) {
    if (report.ok()) return kExitOk;
    // Refusing an environment is a usage outcome, like `train --resume`; damage is a check failure.
    bool only_drift = true;
    for (const auto& e : report.errors) only_drift = only_drift && e.code == verify_code::kPinsDrift;
    return only_drift ? kExitUsage : kExitCheckFailed;
  }

  // Every task built the whole report from the gathered results; they must agree (timings aside),
  // then rank 0 prints it and every task exits with its code. A task that failed ends the job with
  // its own error (MPI_Abort): the other tasks may be waiting in a gather it will never reach.
  int finish_distributed(MpiWorld& world, const Result<VerifyReport>& report) const {
    const std::string who = "rank " + std::to_string(world.rank()) + " of " +
                            std::to_string(world.world_size()) + " on " + world.host();
    if (!report.is_ok()) {
      std::fprintf(stderr, "ckptcheck verify: %s: %s\n", who.c_str(),
                   with_flags(report.status().to_string(), verify_field_flags()).c_str());
      world.abort(kExitUsage);
    }
    nlohmann::json json = report_to_json(*report);
    nlohmann::json agreed = json;
    agreed.erase("seconds");
    // units / bytes null where no split reported a share (nothing of this check was divided).
    const nlohmann::json task = {{"host", world.host()},
                                 {"units", share_units_ ? nlohmann::json(*share_units_) : nlohmann::json()},
                                 {"bytes", share_bytes_ ? nlohmann::json(*share_bytes_) : nlohmann::json()},
                                 {"seconds", report->seconds}};
    // The report first, then this task's share on one line: only the report must agree.
    auto all = all_gather_step(world, "verify: report", agreed.dump() + "\n" + task.dump());
    if (!all.is_ok()) {
      std::fprintf(stderr, "ckptcheck verify: %s: %s\n", who.c_str(), all.status().to_string().c_str());
      world.abort(kExitUsage);
    }
    std::vector<std::string> reports, tasks;
    for (const std::string& a : *all) {
      const size_t cut = a.rfind('\n');
      reports.push_back(a.substr(0, cut));
      tasks.push_back(cut == std::string::npos ? std::string() : a.substr(cut + 1));
    }
    if (world.rank() == 0) print_shares(tasks);
    for (size_t r = 0; r < reports.size(); ++r) {
      if (reports[r] == reports[0]) continue;
      if (world.rank() == 0) {
        std::fprintf(stderr, "ckptcheck verify: rank %zu's report differs from rank 0's: %s\n", r,
                     reports[r].substr(0, 400).c_str());
      }
      return kExitUsage;
    }
    if (world.rank() == 0) print(json, report_to_text(*report));
    exit_with_on_termination(exit_code_of(*report));
    return exit_code_of(*report);
  }

  // One line on stderr: which node scanned how much, and how even the split was.
  static void print_shares(const std::vector<std::string>& tasks) {
    std::string line = "verify --distributed: " + std::to_string(tasks.size()) + " tasks;";
    uint64_t largest = 0, total = 0;
    double slowest = 0;
    for (size_t r = 0; r < tasks.size(); ++r) {
      const nlohmann::json t = nlohmann::json::parse(tasks[r], nullptr, false);
      if (!t.is_object()) continue;
      slowest = std::max(slowest, t.value("seconds", 0.0));
      line += " rank " + std::to_string(r) + " on " + t.value("host", std::string("?")) + ": ";
      if (!t["bytes"].is_number_unsigned()) {
        line += "share not measured;";
        continue;
      }
      const uint64_t bytes = t["bytes"].get<uint64_t>();
      largest = std::max(largest, bytes);
      total += bytes;
      line += std::to_string(t.value("units", size_t{0})) + " units, " + std::to_string(bytes) + " B;";
    }
    char tail[96];
    std::snprintf(
        tail, sizeof tail, " largest/mean share %.3f, slowest task %.2f s\n",
        total ? static_cast<double>(largest) * static_cast<double>(tasks.size()) / static_cast<double>(total)
              : 1.0,
        slowest);
    line += tail;
    std::fwrite(line.data(), 1, line.size(), stderr);
  }

  int usage_error(const Status& status) const {
    std::fprintf(stderr, "ckptcheck verify: %s\n",
                 with_flags(status.to_string(), verify_field_flags()).c_str());
    if (json_)  // --json always answers in JSON, also when there is no report to give
      write_failure_json(path_, kExitUsage, status, with_flags(status.message(), verify_field_flags()));
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
  bool distributed_ = false;
  std::optional<size_t> share_units_;  // --distributed: this task's share, for the line rank 0 prints
  std::optional<uint64_t> share_bytes_;
  std::string config_path_;
  std::string allowed_globals_file_;
  VerifyOptions options_;
};

}  // namespace

const FieldFlags& verify_field_flags() {
  static const FieldFlags flags = {{"jobs", "--jobs"},
                                   {"quick", "--quick"},
                                   {"weights_only", "--weights-only"},
                                   {"pubkey_path", "--pubkey"},
                                   {"allowed_globals", "--allow-global"},
                                   {"current_pins", "--against-env"},
                                   {"distributed", "--distributed"}};
  return flags;
}

std::unique_ptr<Command> make_verify_command() {
  return std::make_unique<VerifyCommand>();
}

}  // namespace ckpt
