#include "verifier/tensors/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

void TensorStatsAccumulator::feed(const uint8_t* data, size_t size) {
  stream_.feed(data, size, [this](const uint8_t* elements, size_t count) {
    for (size_t i = 0; i < count; ++i) add(elements + i * element_size_);
  });
}

nlohmann::json to_json(const TensorStats& s) {
  return {{"elements", s.elements}, {"min", s.min}, {"max", s.max}, {"mean", s.mean()},
          {"l2_norm", s.l2_norm()}, {"nan", s.nan}, {"inf", s.inf}};
}

}  // namespace ckpt
