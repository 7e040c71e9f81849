// `ckptcheck train`: the flags of the built-in workload's training run (verifier/train/train_run.h).
// The drill runs this same command in child processes.
#include <CLI/CLI.hpp>
#include <cstdlib>

#include "verifier/cli/commands.h"
#include "verifier/drill/program_contract.h"
#include "verifier/train/train_run.h"

namespace ckpt {
namespace {

class TrainCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("train", "Train the built-in workload, checkpointing and resuming");
    sub_ = sub;
    sub->add_option("--config", o_.config_path, "pilot config YAML")->required();
    sub->add_option("--steps", o_.steps, "train until this global step (default: the config's steps)");
    sub->add_option("--save-every", o_.save_every, "commit a checkpoint every K steps");
    sub->add_flag("--save-final", o_.save_final, "commit a checkpoint after the last step");
    sub->add_option("--ckpt-dir", o_.ckpt_dir, "checkpoint root")->capture_default_str();
    sub->add_option("--shards", o_.shards, "shard files per checkpoint (ddp/fsdp: one per rank)")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    sub->add_option("--format", o_.format, "shard format: native | safetensors | hdf5")
        ->capture_default_str();
    sub->add_option("--resume", o_.resume, "'latest' (in --ckpt-dir) or a checkpoint path");
    sub->add_option("--metrics", o_.metrics_path, "append one JSON line per step here (default: stdout)");
    sub->add_option("--eval-out", o_.eval_out, "write final eval.json and logits.cks into this dir");
    sub->add_option("--summary", o_.summary_out, "write timings, saves and memory as JSON");
    sub->add_flag("--measure-memory", o_.measure_memory, "measure peak memory of the first step");
    // The drill's hooks into its child runs: not for users, so not in --help (an empty group hides).
    sub->add_option("--drill-hold", o_.hold,
                    "drill hook: after-save | during-save | during-prune (wait to be SIGKILLed)")
        ->group("");
    sub->add_option("--drill-hold-step", o_.hold_step, "drill hook: hold at the save of this step only")
        ->group("");
    CLI::Option* keep_last =
        sub->add_option("--keep-last", o_.keep_last,
                        "after each commit (verified first) delete all but the last N checkpoints; "
                        "`latest` is never deleted")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    sub->add_option("--keep-every", o_.keep_every,
                    "with --keep-last: also keep every checkpoint whose step is a multiple of M")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
        ->needs(keep_last);
    sub->add_option("--inject", o_.inject, "drill negative control applied on resume")->group("");
    sub->add_option("--allow-drift", o_.allow_drift,
                    "resume despite a changed pin (config_sha256, model_revision, dataset_revision)");
    return sub;
  }
  int run() override {
    apply_drill_contract();
    const Status status = run_training(o_);
    return status.is_ok() ? kExitOk : report_failure("train", status);
  }

 private:
  // The drill's program contract (verifier/drill/program_contract.h): its variables fill what the
  // flags leave unset, so `ckptcheck train` is drilled exactly like any other program.
  void apply_drill_contract() {
    auto env = [](const char* name) -> const char* {
      const char* v = std::getenv(name);
      return v && *v ? v : nullptr;
    };
    auto unset = [&](const char* flag) { return sub_->count(flag) == 0; };
    if (const char* v = env(kEnvCkptDir); v && unset("--ckpt-dir")) o_.ckpt_dir = v;
    if (const char* v = env(kEnvSteps); v && unset("--steps")) o_.steps = std::atoll(v);
    if (const char* v = env(kEnvSaveEvery); v && unset("--save-every")) o_.save_every = std::atoll(v);
    if (const char* v = env(kEnvMetrics); v && unset("--metrics")) o_.metrics_path = v;
    if (const char* v = env(kEnvResume); v && unset("--resume")) o_.resume = v;
  }

  CLI::App* sub_ = nullptr;
  TrainOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() {
  return std::make_unique<TrainCommand>();
}

}  // namespace ckpt
