// One measured training run of the built-in workload for `ckptcheck pilot`: a fresh
// `ckptcheck train` process (through `launch` for P ranks) with the config written beside its logs,
// so every variant starts from a clean heap and its peak memory is its own. Torch-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/tensors/state_compare.h"

namespace ckpt {

class Progress;

struct MeasuredRunSpec {
  std::string name;        // "fp32", "bf16+ac", "world 2": for messages and the progress line
  nlohmann::json config;   // a resolved pilot config (PilotConfig::resolved(), data.path absolute)
  int64_t steps = 0;       // train this many steps
  int nproc = 0;           // > 0: through `launch --nproc-per-node nproc`
  std::string dir;         // created; config.yaml, metrics.jsonl, summary.json, logs go here
  std::string executable;  // the ckptcheck binary
  double timeout_seconds = 600;
};

struct MeasuredRun {
  std::string name;
  nlohmann::json summary;         // `train --summary`: timings, memory (first step), eval
  std::vector<StepRecord> steps;  // the per-step metrics (loss, lr, ...)
  double eval_loss = 0;
  int64_t max_rss_bytes = 0;  // the child's own peak (wait4), rank 0 under launch: the launcher's
  double wall_seconds = 0;
};

// kIoError naming the run and the tail of its stderr when the child fails or times out.
Result<MeasuredRun> run_measured_training(const MeasuredRunSpec& spec, Progress* progress);

}  // namespace ckpt
