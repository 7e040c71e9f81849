// Does a checkpoint hold everything a restart needs, and do its counters agree? A checkpoint can
// hash perfectly and still be useless for resuming: Adam moments missing (training restarts with
// zero momentum), the scheduler reset (the LR jumps back to warmup), the RNG or data cursor lost
// (a different sample order), a NaN loss scale. These checks read only names, shapes and a few
// scalars, never the large tensors.
//
// State names (what the trainer exports, fixtures/trainer_torch.h):
//   model.<param>                          trainable params (float) and buffers (BOOL / I64)
//   optimizer.model.<param>.exp_avg        same shape as the param
//   optimizer.model.<param>.exp_avg_sq     same shape as the param
//   optimizer.model.<param>.step           I64 [], optimizer steps taken (not counting skipped ones)
//   scheduler.last_step, .base_lr, .last_lr
//   scaler.scale, .growth_factor, .backoff_factor, .growth_interval, .growth_tracker
//   rng.cpu_state
//   data.epoch, .cursor, .shuffle_seed
//   progress.global_step, .skipped_steps   skipped = steps whose update the loss scaler dropped
//
// Invariant checked: optimizer step + progress.skipped_steps == progress.global_step ==
// scheduler.last_step == the manifest's step.
#pragma once

#include <map>
#include <string>

#include "shards/manifest.h"
#include "shards/tensor_view.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

// Only tensors at most this large are read for the value checks.
constexpr uint64_t kMaxResumeScalarBytes = 1024;

// The tensors whose values check_resumability reads (optimizer steps, scheduler, scaler and
// progress counters), bounded by kMaxResumeScalarBytes.
bool is_resume_scalar(const ManifestTensor& tensor);

// Checks names and shapes in `manifest` and the values in `scalars` (by tensor name, as loaded by
// load_checkpoint_tensors with is_resume_scalar as the select). Appends errors to `report`.
void check_resumability(const Manifest& manifest, const std::map<std::string, LoadedTensor>& scalars,
                        VerifyReport& report);

}  // namespace ckpt
