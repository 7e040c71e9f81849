#include "verifier/tensors/nonfinite_count.h"

#include <algorithm>
#include <cstring>

namespace ckpt {

namespace {

// How many elements have an all-ones exponent (NaN or Inf), branch-free in 32-byte vectors so it
// runs at cache speed: verify calls this on every floating byte right after hashing it, and almost
// every block has none, so the exact NaN/Inf split below runs only on blocks that do.
template <typename Bits>
__attribute__((always_inline)) inline uint64_t count_all_ones_exponent(const uint8_t* data, size_t elements,
                                                                       Bits exponent_mask) {
  typedef Bits Lanes __attribute__((vector_size(32)));
  constexpr size_t kLanes = 32 / sizeof(Bits);
  // A lane counts at most 255 before it is folded, so even 8-bit lanes cannot wrap.
  constexpr size_t kVectorsPerFold = 255;
  Lanes mask;
  for (size_t l = 0; l < kLanes; ++l) mask[l] = exponent_mask;
  uint64_t total = 0;
  size_t i = 0;
  while (elements - i >= kLanes) {
    Lanes counts{};
    const size_t vectors = std::min(kVectorsPerFold, (elements - i) / kLanes);
    for (size_t v = 0; v < vectors; ++v, i += kLanes) {
      Lanes x;
      std::memcpy(&x, data + i * sizeof(Bits), sizeof(x));
      counts -= (Lanes)((x & mask) == mask);  // a true lane is all ones, i.e. -1
    }
    for (size_t l = 0; l < kLanes; ++l) total += counts[l];
  }
  for (; i < elements; ++i) {
    Bits x;
    std::memcpy(&x, data + i * sizeof(Bits), sizeof(Bits));
    total += (x & exponent_mask) == exponent_mask;
  }
  return total;
}

// One entry point per width, cloned for AVX2 (256-bit lanes) and the x86-64 baseline (two 128-bit
// halves), picked once at load time by the dynamic linker.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CKPT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CKPT_CLONES
#endif
CKPT_CLONES uint64_t special_count8(const uint8_t* d, size_t n, uint8_t m) {
  return count_all_ones_exponent<uint8_t>(d, n, m);
}
CKPT_CLONES uint64_t special_count16(const uint8_t* d, size_t n, uint16_t m) {
  return count_all_ones_exponent<uint16_t>(d, n, m);
}
CKPT_CLONES uint64_t special_count32(const uint8_t* d, size_t n, uint32_t m) {
  return count_all_ones_exponent<uint32_t>(d, n, m);
}
CKPT_CLONES uint64_t special_count64(const uint8_t* d, size_t n, uint64_t m) {
  return count_all_ones_exponent<uint64_t>(d, n, m);
}
#undef CKPT_CLONES

uint64_t special_count(const uint8_t* d, size_t n, uint8_t m) {
  return special_count8(d, n, m);
}
uint64_t special_count(const uint8_t* d, size_t n, uint16_t m) {
  return special_count16(d, n, m);
}
uint64_t special_count(const uint8_t* d, size_t n, uint32_t m) {
  return special_count32(d, n, m);
}
uint64_t special_count(const uint8_t* d, size_t n, uint64_t m) {
  return special_count64(d, n, m);
}

// IEEE-754 layouts: an all-ones exponent is Inf (zero mantissa) or NaN (non-zero mantissa).
template <typename Bits>
void count_ieee(const uint8_t* data, size_t elements, Bits exponent_mask, Bits mantissa_mask,
                NonfiniteCount& count) {
  if (special_count(data, elements, exponent_mask) == 0) return;
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
    case DType::kF8E4M3Fnuz:  // no Inf, no -0: 0x80 is the one NaN
    case DType::kF8E5M2Fnuz:
      for (size_t i = 0; i < elements; ++i) count_.nan += data[i] == 0x80;
      break;
    case DType::kF8E8M0:  // an exponent only: 0xff is NaN
      for (size_t i = 0; i < elements; ++i) count_.nan += data[i] == 0xff;
      break;
    default: break;
  }
}

void NonfiniteCounter::feed(const uint8_t* data, size_t size) {
  stream_.feed(data, size,
               [this](const uint8_t* elements, size_t count) { count_elements(elements, count); });
}

}  // namespace ckpt
