#include "verifier/tensors/nonfinite_count.h"

#include <algorithm>
#include <cstring>

namespace ckpt {

namespace {

// IEEE-754 layouts: an all-ones exponent is Inf (zero mantissa) or NaN (non-zero mantissa).
template <typename Bits>
void count_ieee(const uint8_t* data, size_t elements, Bits exponent_mask, Bits mantissa_mask,
                NonfiniteCount& count) {
  for (size_t i = 0; i < elements; ++i) {
    Bits v;
    std::memcpy(&v, data + i * sizeof(Bits), sizeof(Bits));
    if ((v & exponent_mask) == exponent_mask) {
      if (v & mantissa_mask) {
        ++count.nan;
      } else {
        ++count.inf;
      }
    }
  }
}

}  // namespace

NonfiniteCounter::NonfiniteCounter(DType dtype)
    : dtype_(dtype),
      element_size_(dtype_is_floating(dtype) ? dtype_size(dtype) : 0),
      stream_(element_size_) {}

void NonfiniteCounter::count_elements(const uint8_t* data, size_t elements) {
  switch (dtype_) {
    case DType::kF32: count_ieee<uint32_t>(data, elements, 0x7f800000u, 0x007fffffu, count_); break;
    case DType::kF64:
      count_ieee<uint64_t>(data, elements, 0x7ff0000000000000ull, 0x000fffffffffffffull, count_);
      break;
    case DType::kF16: count_ieee<uint16_t>(data, elements, 0x7c00, 0x03ff, count_); break;
    case DType::kBF16: count_ieee<uint16_t>(data, elements, 0x7f80, 0x007f, count_); break;
    case DType::kF8E5M2: count_ieee<uint8_t>(data, elements, 0x7c, 0x03, count_); break;
    case DType::kF8E4M3:  // float8_e4m3fn: no Inf; only S.1111.111 is NaN
      for (size_t i = 0; i < elements; ++i) count_.nan += (data[i] & 0x7f) == 0x7f;
      break;
    default: break;
  }
}

void NonfiniteCounter::feed(const uint8_t* data, size_t size) {
  stream_.feed(data, size,
               [this](const uint8_t* elements, size_t count) { count_elements(elements, count); });
}

}  // namespace ckpt
