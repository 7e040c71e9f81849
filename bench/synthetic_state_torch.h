// Synthetic training state for the benches: F32 tensors shaped like a transformer's weights and
// its AdamW moments, with realistic value distributions (so zstd sees what it would in practice).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "shards/training_state_torch.h"

namespace ckpt::bench {

// `total_bytes` of F32 state in three components (model, exp_avg, exp_avg_sq), tensors of shape
// [rows, 1024], plus a scalar step. Deterministic for a seed.
TrainingState make_synthetic_state(uint64_t total_bytes, uint64_t seed);

// AdamW's second moment as it looks after many steps: an EMA of squared gradients, i.e. a
// per-row scale (log-normal across rows: layers and neurons differ) times a chi-square-like
// spread within a row. Values are positive and around 1e-6.
at::Tensor synthetic_exp_avg_sq(int64_t rows, int64_t cols, at::Generator& gen);

}  // namespace ckpt::bench
