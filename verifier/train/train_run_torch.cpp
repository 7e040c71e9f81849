#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "base/file_io.h"
#include "base/progress.h"
#include "base/seconds_since.h"
#include "base/sha256.h"
#include "fixtures/trainer_torch.h"
#include "formats/native_shard.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_writer.h"
#include "shards/mapped_checkpoint.h"
#include "shards/resharded_load_torch.h"
#include "shards/retention.h"
#include "shards/state_codec_torch.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/pins/pins.h"
#include "verifier/pins/run_pins.h"
#include "verifier/process/drill_hooks.h"
#include "verifier/process/process_clock.h"
#include "verifier/train/config_pins.h"
#include "verifier/train/train_run.h"

namespace ckpt {
namespace {

Result<RestoreFaults> parse_faults(const std::vector<std::string>& names) {
  RestoreFaults faults;
  for (const auto& n : names) {
    if (n == "drop-optimizer-state")
      faults.drop_optimizer_state = true;
    else if (n == "reset-scheduler")
      faults.reset_scheduler = true;
    else if (n == "skip-rng-restore")
      faults.skip_rng_restore = true;
    else if (n == "skip-data-position")
      faults.skip_data_position = true;
    else if (n == "reset-loss-scaler")
      faults.reset_loss_scaler = true;
    else
      return Status::invalid_argument("--inject: unknown restore fault '" + n + "'");
  }
  return faults;
}

nlohmann::json metrics_json(const StepMetrics& m) {
  return {{"step", m.step},
          {"loss", m.loss},
          {"lr", m.lr},
          {"loss_scale", m.loss_scale},
          {"grad_norm", m.grad_norm},
          {"skipped", m.skipped},
          {"step_ms", m.step_ms},
          {"data_ms", m.data_ms},
          {"forward_backward_ms", m.forward_backward_ms},
          {"optimizer_ms", m.optimizer_ms},
          {"tokens", m.tokens}};
}

nlohmann::json memory_json(const StepMemory& m) {
  return {{"peak_rss_bytes", m.peak_rss_bytes},
          {"rss_before_bytes", m.rss_before_bytes},
          {"parameter_bytes", m.parameter_bytes},
          {"gradient_bytes", m.gradient_bytes},
          {"optimizer_state_bytes", m.optimizer_state_bytes},
          {"activation_bytes_estimate", m.activation_bytes_estimate},
          {"what",
           "peak_rss_bytes: process resident-set high-water mark over one full step (zero_grad, forward, "
           "backward, optimizer step), reset just before it; *_bytes by category: tensor storage sizes"}};
}

class TrainRun {
 public:
  explicit TrainRun(TrainOptions options) : o_(std::move(options)) {}

  // Collectives throw when a peer rank dies; that ends this rank with exit 2, and the launcher
  // then stops the rest.
  Status run() {
    try {
      return run_rank();
    } catch (const std::exception& e) {
      return Status::io_error("rank " + std::to_string(env_.rank) + ": " + e.what());
    }
  }

 private:
  bool lead() const { return env_.rank == 0; }

  Status join_group() {
    CKPT_ASSIGN_OR_RETURN(env_, read_rank_env());
    if (config_.device == "cuda" && env_.world_size > visible_accelerators()) {
      return Status::invalid_argument("WORLD_SIZE " + std::to_string(env_.world_size) + " exceeds the " +
                                      std::to_string(visible_accelerators()) +
                                      " visible CUDA devices (one rank per device)");
    }
    if (config_.strategy == "single") {
      if (env_.world_size > 1)
        return Status::invalid_argument(config_.source_path + ": strategy 'single' cannot run as rank " +
                                        std::to_string(env_.rank) + " of WORLD_SIZE " +
                                        std::to_string(env_.world_size) + "; set strategy: ddp or fsdp");
      return Status::ok();
    }
    CKPT_ASSIGN_OR_RETURN(group_, ProcessGroup::connect(env_));
    return Status::ok();
  }

  Status run_rank() {
    const auto start = std::chrono::steady_clock::now();
    HoldPoint hold;
    if (!parse_hold_point(o_.hold, &hold))
      return Status::invalid_argument("--drill-hold: unknown point '" + o_.hold + "'");
    hold_ = hold;
    auto faults = parse_faults(o_.inject);
    if (!faults.is_ok()) return faults.status();
    auto config = load_pilot_config(o_.config_path);
    if (!config.is_ok()) return config.status();
    config_ = *config;
    if (o_.steps < 0) o_.steps = config_.steps;
    Status joined = join_group();
    if (!joined.is_ok()) return joined;
    auto trainer = group_ ? Trainer::create(config_, group_) : Trainer::create(config_);
    if (!trainer.is_ok()) return trainer.status();
    trainer_ = std::move(*trainer);
    summary_["process_start_seconds"] = seconds_since_process_start();
    summary_["model_load_seconds"] = seconds_since(start);
    if (lead() && (o_.save_every > 0 || o_.save_final)) {
      // Refused now, not at the first save after a while of training.
      auto lock = RootWriterLock::acquire(o_.ckpt_dir);
      if (!lock.is_ok()) return lock.status();
      root_lock_.emplace(std::move(*lock));
    }
    auto pins = compute_pins(config_);
    if (!pins.is_ok()) return pins.status();
    pins_ = *pins;

    if (!o_.resume.empty()) {
      Status restored = restore(*faults);
      if (!restored.is_ok()) return restored;
    }
    if (!o_.metrics_path.empty() && lead()) {
      metrics_.open(o_.metrics_path, std::ios::app);
      if (!metrics_) return Status::io_error(o_.metrics_path + ": cannot open for writing");
    }
    Status trained = train_loop();
    if (!trained.is_ok()) return trained;
    if (o_.save_final && last_saved_step_ != trainer_->global_step()) {
      Status saved = save();
      if (!saved.is_ok()) return saved;
    }
    if (!o_.eval_out.empty() && lead()) {
      Status evaluated = write_eval();
      if (!evaluated.is_ok()) return evaluated;
    }
    summary_["total_seconds"] = seconds_since(start);
    if (group_) summary_["world_size"] = env_.world_size;
    if (!o_.summary_out.empty() && lead()) {
      Status written = write_file_atomically(o_.summary_out, summary_.dump(1) + "\n");
      if (!written.is_ok()) return written;
    }
    return Status::ok();
  }

  Status restore(const RestoreFaults& faults) {
    const auto start = std::chrono::steady_clock::now();
    const std::string target = o_.resume == "latest" ? o_.ckpt_dir : o_.resume;
    CKPT_ASSIGN_OR_RETURN(std::string dir, resolve_checkpoint_path(target));
    CKPT_ASSIGN_OR_RETURN(Manifest manifest, read_manifest_file(dir));
    CKPT_RETURN_IF_ERROR(check_resume_drift(manifest.pins, pins_, o_.allow_drift, &drift_extra_));
    if (group_) {
      CKPT_RETURN_IF_ERROR(restore_resharded(dir, manifest, faults));
    } else {
      // Hashes checked on the way; one copy, from the page cache straight into the new tensors.
      CKPT_ASSIGN_OR_RETURN(auto mapped, map_checkpoint_tensors(dir, manifest));
      CKPT_ASSIGN_OR_RETURN(auto tensors, tensors_from_views(mapped.tensors()));
      CKPT_RETURN_IF_ERROR(trainer_->import_state(std::move(tensors), faults));
    }
    summary_["restored_from"] = dir;
    summary_["restored_step"] = manifest.step;
    summary_["restore_seconds"] = seconds_since(start);
    if (lead()) announce_event("restored", dir);
    return Status::ok();
  }

  // Every rank reads only the rows its layout holds. A rank the checkpoint has no RNG stream for
  // (the world grew) keeps its freshly seeded one; that is reported, not hidden.
  Status restore_resharded(const std::string& dir, const Manifest& manifest, RestoreFaults faults) {
    ReshardStats stats;
    CKPT_ASSIGN_OR_RETURN(auto tensors,
                          load_distributed_state(dir, manifest, trainer_->export_state(), &stats));
    for (const std::string& name : stats.absent) {
      if (name.rfind("rng.", 0) == 0 && manifest.world_size != env_.world_size)
        faults.skip_rng_restore = true;
    }
    CKPT_RETURN_IF_ERROR(trainer_->import_state(tensors, faults));
    summary_["reshard"] = {{"from_world_size", manifest.world_size},
                           {"from_strategy", manifest.strategy},
                           {"to_world_size", env_.world_size},
                           {"to_strategy", config_.strategy},
                           {"bytes_read", stats.bytes_read},
                           {"whole_chunk_reads_hashed", stats.whole_chunk_reads},
                           {"partial_chunk_reads_unhashed", stats.partial_chunk_reads},
                           {"rng_reseeded", faults.skip_rng_restore}};
    return Status::ok();
  }

  Status train_loop() {
    Progress progress;
    double step_ms = 0, data_ms = 0, fwd_ms = 0, opt_ms = 0, comm_ms = 0;
    int64_t tokens = 0, steps = 0;
    const auto start = std::chrono::steady_clock::now();
    while (trainer_->global_step() < o_.steps) {
      StepMetrics m;
      if (o_.measure_memory && !summary_.contains("memory")) {
        StepMemory memory;
        m = trainer_->measured_step(&memory);
        summary_["memory"] = memory_json(memory);
      } else {
        m = trainer_->train_step();
      }
      step_ms += m.step_ms;
      data_ms += m.data_ms;
      fwd_ms += m.forward_backward_ms;
      opt_ms += m.optimizer_ms;
      tokens += m.tokens;
      comm_ms += m.communication_ms;
      ++steps;
      const std::string line = metrics_json(m).dump();
      if (metrics_.is_open()) {
        metrics_ << line << "\n";
        metrics_.flush();
      } else if (lead()) {
        std::printf("%s\n", line.c_str());
      }
      if (lead()) progress.update("train", trainer_->global_step(), o_.steps);
      if (o_.save_every > 0 && trainer_->global_step() % o_.save_every == 0) {
        progress.message("save");
        CKPT_RETURN_IF_ERROR(save());
      }
    }
    const double wall = seconds_since(start);
    if (steps > 0) {
      summary_["steps"] = steps;
      summary_["timings"] = {{"step_seconds_mean", step_ms / 1000 / steps},
                             {"data_wait_seconds_mean", data_ms / 1000 / steps},
                             {"forward_backward_seconds_mean", fwd_ms / 1000 / steps},
                             {"optimizer_seconds_mean", opt_ms / 1000 / steps},
                             {"communication_seconds_mean", comm_ms / 1000 / steps},
                             {"train_wall_seconds", wall},
                             {"tokens_per_second", wall > 0 ? tokens / wall : 0.0}};
    }
    return Status::ok();
  }

  // Every rank holds here when told to (the drill SIGKILLs them all); only rank 0 announces.
  void hold(const std::string& kind, const std::string& detail) {
    if (lead()) hold_for_kill(kind, detail);
    for (;;) ::pause();
  }

  void record_save(int64_t step, const CommittedCheckpoint& committed) {
    last_saved_step_ = step;
    // The drill contract's checkpoint event: written once the checkpoint is durable (committed).
    if (metrics_.is_open()) {
      metrics_ << nlohmann::json{{"event", "checkpoint"}, {"step", step}, {"path", committed.dir}}.dump()
               << "\n";
      metrics_.flush();
    }
    summary_["saves"].push_back(
        {{"step", step},
         {"dir", committed.dir},
         {"seconds", committed.seconds},
         {"bytes", committed.bytes},
         {"mb_per_second", committed.seconds > 0 ? committed.bytes / 1e6 / committed.seconds : 0}});
  }

  // One save path for every world size: a single process is a world of one.
  Status save() {
    ByteCollective& group = group_ ? static_cast<ByteCollective&>(*group_) : single_;
    const TrainingState state = trainer_->export_state();
    CKPT_ASSIGN_OR_RETURN(StateViews views, save_views_of_state(state, group.world_size()));
    CheckpointMetadata metadata;
    metadata.step = trainer_->global_step();
    metadata.world_size = group.world_size();
    metadata.strategy = config_.strategy;
    metadata.config = config_.resolved();
    metadata.pins = pins_;
    metadata.extra = drift_extra_;
    CheckpointWriteOptions options;
    options.num_shards = group.world_size() > 1 ? 1 : o_.shards;  // ddp/fsdp: one shard per rank
    options.format = o_.format;
    options.jobs = 1;  // one shard at a time, so "during-save" holds with exactly one shard written
    const bool hold_here = o_.hold_step < 0 || o_.hold_step == trainer_->global_step();
    if (hold_ == HoldPoint::kDuringSave && hold_here) {
      options.on_shard_written = [this](size_t index, const std::string& path) {
        if (index == 0) hold("shard-written", path);
      };
    }
    CKPT_ASSIGN_OR_RETURN(
        CommittedCheckpoint committed,
        write_checkpoint(o_.ckpt_dir, views.replicated, views.rank_tensors, metadata, options, group));
    record_save(metadata.step, committed);
    if (hold_ == HoldPoint::kAfterSave && hold_here) hold("committed", committed.dir);
    if (lead()) announce_event("committed", committed.dir);
    if (lead() && o_.keep_last > 0) CKPT_RETURN_IF_ERROR(prune_after_commit(committed.dir));
    return Status::ok();
  }

  // Order: commit (manifest fsynced, dir renamed, root fsynced) -> `latest` -> a full verify of the
  // new checkpoint (every shard and chunk re-hashed from disk; --quick would trust bytes it never
  // read back) -> prune. So a save that is not durable, or not sound, never costs an older good
  // checkpoint, and `latest` is never pruned.
  Status prune_after_commit(const std::string& dir) {
    CKPT_ASSIGN_OR_RETURN(VerifyReport report, verify_checkpoint(dir, VerifyOptions{}));
    if (!report.ok()) {
      const VerifyIssue& e = report.errors.front();
      return Status::corruption(dir + ": fails verify right after its commit ([" + e.code + "] " + e.message +
                                "); nothing was pruned");
    }
    PruneHooks hooks;
    if (hold_ == HoldPoint::kDuringPrune && (o_.hold_step < 0 || o_.hold_step == trainer_->global_step())) {
      hooks.after_first_rename = [this](const std::string& renamed) { hold("prune-renamed", renamed); };
    }
    CKPT_ASSIGN_OR_RETURN(
        PruneResult pruned,
        prune_checkpoints(o_.ckpt_dir, RetentionPolicy{o_.keep_last, o_.keep_every}, dir, hooks));
    for (const auto& removed : pruned.removed) announce_event("pruned", removed);
    return Status::ok();
  }

  Status write_eval() {
    const auto start = std::chrono::steady_clock::now();
    EvalResult eval = trainer_->evaluate();
    CKPT_RETURN_IF_ERROR(make_directory(o_.eval_out));
    TrainingState logits{{"eval.logits", "eval", eval.logits.contiguous()}};
    CKPT_ASSIGN_OR_RETURN(auto views, views_of_state(logits));
    const std::string logits_path = o_.eval_out + "/logits.cks";
    ::unlink(logits_path.c_str());  // eval output is a product of this run, not committed state
    ChunkInfo info;
    info.name = views[0].name;
    info.component = "eval";
    info.dtype = views[0].dtype;
    info.global_shape = views[0].shape;
    info.offsets.assign(views[0].shape.size(), 0);
    info.shape = views[0].shape;
    CKPT_ASSIGN_OR_RETURN(auto written, write_native_shard(logits_path, {{info, views[0].data}},
                                                           {{"step", trainer_->global_step()}}));
    (void)written;
    nlohmann::json j = {{"step", trainer_->global_step()},
                        {"mean_loss", eval.mean_loss},
                        {"logits_sha256", eval.logits_sha256},
                        {"logits_file", "logits.cks"}};
    summary_["eval_seconds"] = seconds_since(start);
    summary_["eval"] = j;
    return write_file_atomically(o_.eval_out + "/eval.json", j.dump(1) + "\n");
  }

  TrainOptions o_;
  HoldPoint hold_ = HoldPoint::kNone;
  PilotConfig config_;
  std::unique_ptr<Trainer> trainer_;
  nlohmann::json pins_;
  nlohmann::json drift_extra_ = nlohmann::json::object();
  nlohmann::json summary_ = nlohmann::json::object();
  std::ofstream metrics_;
  int64_t last_saved_step_ = -1;
  RankEnv env_;
  std::shared_ptr<ProcessGroup> group_;      // set for ddp | fsdp (a world of one without torchrun's env)
  SingleProcess single_;                     // the group of a `single` run
  std::optional<RootWriterLock> root_lock_;  // held by the rank that commits
};

}  // namespace

Status run_training(const TrainOptions& options) {
  return TrainRun(options).run();
}

}  // namespace ckpt
