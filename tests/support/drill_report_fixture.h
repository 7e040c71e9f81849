// A drill report as `ckptcheck drill` writes it, reduced to what `plan` reads: 10 GiB of parameters,
// 10 GiB of gradients, 40 GiB of AdamW state, 20 GiB of activations, half-second steps.
#pragma once

#include <nlohmann/json.hpp>

namespace ckpt {

inline nlohmann::json drill_report() {
  return nlohmann::json::parse(R"({
    "config": {"name": "pilot"},
    "measurements": {
      "memory": {"peak_rss_bytes": 1000, "rss_before_bytes": 500, "parameter_bytes": 10737418240,
                 "gradient_bytes": 10737418240, "optimizer_state_bytes": 42949672960,
                 "activation_bytes_estimate": 21474836480},
      "timings": {"step_seconds_mean": 0.5, "data_wait_seconds_mean": 0.1, "forward_backward_seconds_mean": 0.4,
                  "optimizer_seconds_mean": 0.1, "eval_seconds": 30, "checkpoint_save_seconds": 60,
                  "checkpoint_bytes": 1000000, "restore_seconds": 20, "verify_seconds": 5,
                  "tokens_per_second": 1000},
      "eval_every_steps": 100}})");
}

}  // namespace ckpt
