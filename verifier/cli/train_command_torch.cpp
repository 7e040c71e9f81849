// `ckptcheck train`: the flags of the built-in workload's training run (verifier/train/train_run.h).
// The drill runs this same command in child processes.
#include <CLI/CLI.hpp>

#include "verifier/cli/commands.h"
#include "verifier/train/train_run.h"

namespace ckpt {
namespace {

class TrainCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("train", "Train the reference workload, checkpointing and resuming");
    sub->add_option("--config", o_.config_path, "pilot config YAML")->required();
    sub->add_option("--steps", o_.steps, "train until this global step (default: the config's steps)");
    sub->add_option("--save-every", o_.save_every, "commit a checkpoint every K steps");
    sub->add_flag("--save-final", o_.save_final, "commit a checkpoint after the last step");
    sub->add_option("--ckpt-dir", o_.ckpt_dir, "checkpoint root")->capture_default_str();
    sub->add_option("--shards", o_.shards, "shard files per checkpoint (ddp/fsdp: one per rank)")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    sub->add_option("--format", o_.format, "shard format")->capture_default_str();
    sub->add_option("--resume", o_.resume, "'latest' (in --ckpt-dir) or a checkpoint path");
    sub->add_option("--metrics", o_.metrics_path, "append one JSON line per step here (default: stdout)");
    sub->add_option("--eval-out", o_.eval_out, "write final eval.json and logits.cks into this dir");
    sub->add_option("--summary", o_.summary_out, "write timings, saves and memory as JSON");
    sub->add_flag("--measure-memory", o_.measure_memory, "measure peak memory of the first step");
    sub->add_option("--drill-hold", o_.hold, "drill hook: after-save | during-save (wait to be SIGKILLed)");
    sub->add_option("--drill-hold-step", o_.hold_step, "drill hook: hold at the save of this step only");
    sub->add_option("--inject", o_.inject, "drill negative control applied on resume");
    sub->add_option("--allow-drift", o_.allow_drift,
                    "resume despite a changed pin (config_sha256, model_revision, dataset_revision)");
    return sub;
  }
  int run() override {
    const Status status = run_training(o_);
    return status.is_ok() ? kExitOk : report_failure("train", status);
  }

 private:
  TrainOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() {
  return std::make_unique<TrainCommand>();
}

}  // namespace ckpt
