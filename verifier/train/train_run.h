// One training run of the built-in workload: load the config, join the process group (torchrun's
// environment), restore from a checkpoint if asked (checking the pins for drift), train, commit
// checkpoints through the one save pipeline, evaluate, and report timings, saves and memory.
// Cooperates with the drill through verifier/process/drill_hooks.h: it announces each commit and,
// when told to, holds at a save until the drill SIGKILLs it. Torch-free interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

struct TrainOptions {
  std::string config_path;
  int64_t steps = -1;  // target global step; -1 = the config's `steps`
  int64_t save_every = 0;
  bool save_final = false;
  std::string ckpt_dir = "checkpoints";
  size_t shards = 2;
  std::string format = "native";
  std::string resume;
  std::string metrics_path;
  std::string eval_out;
  std::string summary_out;
  std::string hold;
  int64_t hold_step = -1;  // hold only at the save of this step; -1 = the first save
  std::vector<std::string> inject;
  std::vector<std::string> allow_drift;
  bool measure_memory = false;
  // Retention (shards/retention.h): after each commit, once the new checkpoint is verified, keep
  // the last `keep_last` committed checkpoints plus every step that is a multiple of `keep_every`.
  int64_t keep_last = 0;  // 0 = prune nothing
  int64_t keep_every = 0;
};

// Runs to options.steps. Collectives throw when a peer rank dies: that ends this rank with an
// I/O error, and the launcher then stops the rest.
Status run_training(const TrainOptions& options);

}  // namespace ckpt
