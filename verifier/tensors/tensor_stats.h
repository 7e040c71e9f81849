// Summary numbers of a tensor for `inspect --stats`, accumulated while its bytes stream past, so a
// tensor of any size is summarised in bounded memory. Elements are widened with
// element_as_double (bf16/f16 decoded exactly). min, max, mean and the L2 norm are over the
// finite elements; NaN and Inf are counted, never folded into the other numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "formats/dtype.h"
#include "formats/element_stream.h"

namespace ckpt {

struct TensorStats {
  uint64_t elements = 0;  // all elements seen, finite or not
  uint64_t finite = 0;
  uint64_t nan = 0;
  uint64_t inf = 0;
  double min = 0;  // of the finite elements; meaningless (not measured) when finite == 0
  double max = 0;
  long double sum = 0;
  long double sum_squares = 0;
  double mean() const { return finite ? static_cast<double>(sum / finite) : 0; }
  double l2_norm() const;
};

class TensorStatsAccumulator {
 public:
  explicit TensorStatsAccumulator(DType dtype);
  // Feeds the next payload bytes; an element split across two calls is carried over.
  void feed(const uint8_t* data, size_t size);
  const TensorStats& stats() const { return stats_; }  // a partial trailing element is ignored

 private:
  void add(const uint8_t* element);
  // The common case without a per-element dtype switch or long double arithmetic: partial sums in
  // double over one run, folded into the long double totals once per run.
  void add_f32_run(const uint8_t* elements, size_t count);
  DType dtype_;
  size_t element_size_;
  ElementStream stream_;
  TensorStats stats_;
};

nlohmann::json to_json(const TensorStats& stats);

}  // namespace ckpt
