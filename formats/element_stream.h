// Turns a payload read in arbitrary pieces back into whole elements: an element split between two
// reads is held until its remaining bytes arrive. Shared by every streaming per-element pass
// (NaN counting during verify, inspect --stats), so the split logic exists once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ckpt {

class ElementStream {
 public:
  explicit ElementStream(size_t element_size) : element_size_(element_size) {}

  // Calls on_elements(const uint8_t* data, size_t count) for every run of whole elements in the
  // bytes so far. A partial trailing element is kept for the next call (and ignored at the end).
  template <typename OnElements>
  void feed(const uint8_t* data, size_t size, OnElements&& on_elements) {
    if (element_size_ == 0) return;
    if (carried_ != 0) {
      const size_t take = std::min(size, element_size_ - carried_);
      std::memcpy(carry_ + carried_, data, take);
      carried_ += take;
      data += take;
      size -= take;
      if (carried_ < element_size_) return;
      on_elements(carry_, size_t{1});
      carried_ = 0;
    }
    const size_t whole = size / element_size_;
    if (whole) on_elements(data, whole);
    carried_ = size - whole * element_size_;
    std::memcpy(carry_, data + whole * element_size_, carried_);
  }

 private:
  size_t element_size_;  // at most 8 (the widest dtype)
  uint8_t carry_[8] = {};
  size_t carried_ = 0;
};

}  // namespace ckpt
