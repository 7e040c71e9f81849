// Counts NaN and Inf elements of a floating tensor while its bytes stream past (the verifier feeds
// it from the same pass that hashes, so data is read once).
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"
#include "formats/element_stream.h"

namespace ckpt {

struct NonfiniteCount {
  uint64_t nan = 0;
  uint64_t inf = 0;
  bool any() const { return nan != 0 || inf != 0; }
  NonfiniteCount& operator+=(const NonfiniteCount& other) {
    nan += other.nan;
    inf += other.inf;
    return *this;
  }
};

class NonfiniteCounter {
 public:
  explicit NonfiniteCounter(DType dtype);
  // Feeds the next bytes of the payload; an element split between two calls is carried over.
  void feed(const uint8_t* data, size_t size);
  // Counts so far; a partial trailing element is ignored.
  const NonfiniteCount& count() const { return count_; }
  bool counts_anything() const { return element_size_ != 0; }  // false for integer dtypes

 private:
  void count_elements(const uint8_t* data, size_t elements);
  DType dtype_;
  size_t element_size_;  // 0: not a floating dtype, nothing is counted
  ElementStream stream_;
  NonfiniteCount count_;
};

}  // namespace ckpt
