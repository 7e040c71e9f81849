#include "verifier/tensors/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ckpt {

double TensorStats::l2_norm() const {
  return std::sqrt(static_cast<double>(sum_squares));
}

TensorStatsAccumulator::TensorStatsAccumulator(DType dtype)
    : dtype_(dtype), element_size_(dtype_size(dtype)), stream_(element_size_) {}

void TensorStatsAccumulator::add(const uint8_t* element) {
  const double v = element_as_double(element, dtype_);
  ++stats_.elements;
  if (std::isnan(v)) {
    ++stats_.nan;
    return;
  }
  if (std::isinf(v)) {
    ++stats_.inf;
    return;
  }
  if (stats_.finite == 0 || v < stats_.min) stats_.min = v;
  if (stats_.finite == 0 || v > stats_.max) stats_.max = v;
  ++stats_.finite;
  stats_.sum += v;
  stats_.sum_squares += static_cast<long double>(v) * v;
}

void TensorStatsAccumulator::add_f32_run(const uint8_t* elements, size_t count) {
  double sum = 0, sum_squares = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  uint64_t finite = 0, nan = 0, inf = 0;
  for (size_t i = 0; i < count; ++i) {
    float f;
    std::memcpy(&f, elements + i * sizeof(float), sizeof(float));  // payloads need not be aligned
    const double v = f;
    if (std::isfinite(v)) {
      ++finite;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      sum_squares += v * v;
    } else if (std::isnan(v)) {
      ++nan;
    } else {
      ++inf;
    }
  }
  stats_.elements += count;
  stats_.nan += nan;
  stats_.inf += inf;
  if (finite == 0) return;
  if (stats_.finite == 0 || lo < stats_.min) stats_.min = lo;
  if (stats_.finite == 0 || hi > stats_.max) stats_.max = hi;
  stats_.finite += finite;
  stats_.sum += sum;
  stats_.sum_squares += sum_squares;
}

void TensorStatsAccumulator::feed(const uint8_t* data, size_t size) {
  stream_.feed(data, size, [this](const uint8_t* elements, size_t count) {
    if (dtype_ == DType::kF32) {
      add_f32_run(elements, count);
      return;
    }
    for (size_t i = 0; i < count; ++i) add(elements + i * element_size_);
  });
}

nlohmann::json to_json(const TensorStats& s) {
  // min, max, mean and L2 are of the finite elements: with none (an empty tensor, all NaN or Inf)
  // they were not measured, and are null, never 0.
  const auto measured = [&](double v) { return s.finite ? nlohmann::json(v) : nlohmann::json(); };
  return {{"elements", s.elements},
          {"finite", s.finite},
          {"min", measured(s.min)},
          {"max", measured(s.max)},
          {"mean", measured(s.mean())},
          {"l2_norm", measured(s.l2_norm())},
          {"nan", s.nan},
          {"inf", s.inf}};
}

}  // namespace ckpt
