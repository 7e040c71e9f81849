// ckptcheck's public C++ API, LibTorch part: save a training loop's state as a sharded, hashed,
// atomically committed checkpoint, and load it back with every chunk's SHA-256 checked. Installed
// as <ckptcheck/ckptcheck_torch.h>; link `ckptcheck::ckptcheck_torch` (find_package(ckptcheck)).
//
// Tensor names carry their component before the first dot, which is how verify and the drill
// group them: model.<param>, optimizer.model.<param>.exp_avg / .exp_avg_sq / .step,
// scheduler.last_step / base_lr / last_lr, scaler.scale / growth_factor / backoff_factor /
// growth_interval / growth_tracker, rng.cpu_state, data.epoch / cursor / shuffle_seed,
// progress.global_step / skipped_steps. `verify` checks that these are present and agree (README,
// "Verify": optimizer_state_missing, step_disagreement, ...); other names are saved and loaded
// all the same.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "ckptcheck.h"

namespace ckptcheck {

struct TrainingState {
  int64_t step = 0;  // the global step the state is at (the manifest's step)
  // Name -> tensor. Any dtype torch and the shard formats share (float, half, bfloat16, double,
  // int64/32/16/8, uint8, bool); any device and layout (saved from a contiguous CPU copy).
  std::map<std::string, at::Tensor> tensors;
  // Free-form strings recorded in the manifest (extra.metadata) and returned by load.
  std::map<std::string, std::string> metadata;
};

struct SaveOptions {
  size_t shards = 1;              // shard files; large tensors are split by rows across them
  std::string format = "native";  // native | safetensors | hdf5 (as `ckptcheck train --format`)
  size_t jobs = 0;                // writer threads; 0 = min(shards, cores)
};

struct SavedCheckpoint {
  std::string dir;  // <root>/step_<N>, committed: every shard and the manifest fsynced, renamed
  uint64_t bytes = 0;
  double seconds = 0;
};

// Writes `state` into `root` through ckptcheck's one save pipeline (the one `ckptcheck train`
// uses): shards are written and fsynced in a temp dir, the manifest records every shard's and
// chunk's SHA-256, and the dir is renamed to step_<N> before `latest` is replaced. A save that
// fails part way leaves no committed checkpoint. Single process (a world of one).
Result<SavedCheckpoint> save(const std::string& root, const TrainingState& state,
                             const SaveOptions& options = {});

// Loads a checkpoint: `path` is a checkpoint dir or a root (its latest committed checkpoint).
// Shards are memory-mapped and every chunk's SHA-256 is checked against the manifest before the
// bytes are copied into new CPU tensors. A damaged checkpoint fails with status().damage().
Result<TrainingState> load(const std::string& path);

}  // namespace ckptcheck
