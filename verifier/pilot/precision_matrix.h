// `pilot --matrix`: the same config as fp32 and bf16 autocast, each with activation checkpointing
// off and on, for the same steps; one table of memory, time and numerics, and the words that say
// what each choice costs. Mixed precision and activation checkpointing are separate choices, so
// each is measured on its own and together. Torch-free: the runs are child processes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// What one variant's run measured (verifier/pilot/measured_run.h fills it from the run's files).
struct VariantMeasurement {
  std::string precision;                 // fp32 | bf16
  std::string activation_checkpointing;  // none | blocks
  double step_peak_rss_bytes = 0;        // VmHWM over one full step incl. the optimizer step
  double step_rss_before_bytes = 0;      // resident just before that step
  double step_seconds = 0;               // mean over the run's steps
  double tokens_per_second = 0;
  std::vector<double> losses;  // per step
  double eval_loss = 0;
  std::string eval_logits_sha256;
  // The step's own memory: what the step added on top of what was resident before it.
  double step_memory_bytes() const { return step_peak_rss_bytes - step_rss_before_bytes; }
  std::string name() const;  // "fp32", "fp32+ac", "bf16", "bf16+ac"
};

struct MatrixOptions {
  // bf16 passes when its final eval loss and every per-step loss lie within this relative
  // difference of fp32's.
  double loss_rtol = 0.05;
};

// The four variants in table order: fp32, fp32+ac, bf16, bf16+ac.
std::vector<std::pair<std::string, std::string>> matrix_variants();

// The report's "matrix" object: variants with their numbers and numerics against fp32, the
// recompute cost per precision, the checks (activation checkpointing must not change one bit;
// bf16 within loss_rtol) and the plain-words summary. kInvalidArgument unless all four variants
// are given.
Result<nlohmann::json> analyze_matrix(const std::vector<VariantMeasurement>& variants,
                                      const MatrixOptions& options);

// The table and the words under it, for the terminal.
std::string matrix_table(const nlohmann::json& matrix);

}  // namespace ckpt
