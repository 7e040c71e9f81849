#include "bench/synthetic_state_torch.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ckpt::bench {

namespace {
constexpr int64_t kCols = 1024;
constexpr int64_t kTensorsPerComponent = 8;
constexpr int64_t kStep = 1000;  // the step write_synthetic_checkpoint and the save bench record

// The small state a resume needs besides the big tensors (what `ckptcheck verify` checks for):
// per-parameter optimizer steps, scheduler, loss scaler, data position, RNG, progress counters.
void add_resume_scalars(TrainingState& state) {
  std::vector<std::string> params;
  for (const auto& t : state) {
    if (t.component == "model") params.push_back(t.name);
  }
  for (const auto& p : params)
    state.push_back({"optimizer." + p + ".step", "optimizer", at::full({}, kStep, at::kLong)});
  auto scalar = [&](const std::string& name, const std::string& component, double v, at::ScalarType type) {
    state.push_back({name, component, at::full({}, v, type)});
  };
  scalar("scheduler.last_step", "scheduler", kStep, at::kLong);
  scalar("scheduler.base_lr", "scheduler", 3e-4, at::kDouble);
  scalar("scheduler.last_lr", "scheduler", 1.5e-4, at::kDouble);
  scalar("progress.global_step", "progress", kStep, at::kLong);
  scalar("progress.skipped_steps", "progress", 0, at::kLong);
  scalar("scaler.scale", "scaler", 65536, at::kFloat);
  scalar("scaler.growth_factor", "scaler", 2, at::kFloat);
  scalar("scaler.backoff_factor", "scaler", 0.5, at::kFloat);
  scalar("scaler.growth_interval", "scaler", 2000, at::kLong);
  scalar("scaler.growth_tracker", "scaler", 0, at::kLong);
  scalar("data.epoch", "data", 3, at::kLong);
  scalar("data.cursor", "data", 123456, at::kLong);
  scalar("data.shuffle_seed", "data", 1234, at::kLong);
  state.push_back({"rng.cpu_state", "rng", at::zeros({5056}, at::kByte)});
}

}  // namespace

at::Tensor synthetic_exp_avg_sq(int64_t rows, int64_t cols, at::Generator& gen) {
  const at::Tensor row_scale = at::exp(at::normal(0.0, 1.0, {rows, 1}, gen)) * 1e-3;
  const at::Tensor g1 = at::normal(0.0, 1.0, {rows, cols}, gen) * row_scale;
  const at::Tensor g2 = at::normal(0.0, 1.0, {rows, cols}, gen) * row_scale;
  return ((g1 * g1 + g2 * g2) * 0.5).contiguous();
}

TrainingState make_synthetic_state(uint64_t total_bytes, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const uint64_t per_tensor = std::max<uint64_t>(total_bytes / (3 * kTensorsPerComponent), kCols * 4);
  const int64_t rows = static_cast<int64_t>(per_tensor / (kCols * 4));
  TrainingState state;
  for (int64_t i = 0; i < kTensorsPerComponent; ++i) {
    const std::string name = "model.layers." + std::to_string(i) + ".w";
    state.push_back({name, "model", at::normal(0.0, 0.02, {rows, kCols}, gen)});
    state.push_back(
        {"optimizer." + name + ".exp_avg", "optimizer", at::normal(0.0, 1e-4, {rows, kCols}, gen)});
    state.push_back(
        {"optimizer." + name + ".exp_avg_sq", "optimizer", synthetic_exp_avg_sq(rows, kCols, gen)});
  }
  add_resume_scalars(state);
  return state;
}

}  // namespace ckpt::bench
