#include "bench/synthetic_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <string>

namespace ckpt::bench {

namespace {
constexpr int64_t kCols = 1024;
constexpr int64_t kTensorsPerComponent = 8;
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
    state.push_back({"optimizer." + name + ".exp_avg", "optimizer", at::normal(0.0, 1e-4, {rows, kCols}, gen)});
    state.push_back({"optimizer." + name + ".exp_avg_sq", "optimizer", synthetic_exp_avg_sq(rows, kCols, gen)});
  }
  state.push_back({"progress.step", "progress", at::full({}, 1000, at::kLong)});
  return state;
}

}  // namespace ckpt::bench
