#include "verifier/tensors/nonfinite_count.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::bytes_of;

TEST(NonfiniteCounter, CountsF32AndF64NanAndInf) {
  const float fnan = std::numeric_limits<float>::quiet_NaN(), finf = std::numeric_limits<float>::infinity();
  NonfiniteCounter f32(DType::kF32);
  const auto b = bytes_of<float>({1.f, fnan, -finf, finf, 0.f, -fnan, 3.4e38f});
  f32.feed(b.data(), b.size());
  EXPECT_EQ(f32.count().nan, 2u);
  EXPECT_EQ(f32.count().inf, 2u);
  NonfiniteCounter f64(DType::kF64);
  const auto d = bytes_of<double>({1.0, std::numeric_limits<double>::quiet_NaN(), 1e308});
  f64.feed(d.data(), d.size());
  EXPECT_EQ(f64.count().nan, 1u);
  EXPECT_EQ(f64.count().inf, 0u);
}

TEST(NonfiniteCounter, CountsFloat8) {
  // e5m2: 0x7c = +inf, 0xfc = -inf, 0x7e = nan, 0x7b = max finite; e4m3fn: no inf, 0x7f/0xff = nan.
  NonfiniteCounter e5m2(DType::kF8E5M2);
  const std::vector<uint8_t> a = {0x7c, 0xfc, 0x7e, 0x7b, 0x00};
  e5m2.feed(a.data(), a.size());
  EXPECT_EQ(e5m2.count().nan, 1u);
  EXPECT_EQ(e5m2.count().inf, 2u);
  NonfiniteCounter e4m3(DType::kF8E4M3);
  const std::vector<uint8_t> b = {0x7f, 0xff, 0x7e, 0x78, 0x00};
  e4m3.feed(b.data(), b.size());
  EXPECT_EQ(e4m3.count().nan, 2u);
  EXPECT_EQ(e4m3.count().inf, 0u);
  NonfiniteCounter u16(DType::kU16);  // integers have no NaN
  const std::vector<uint8_t> c = {0xff, 0xff};
  u16.feed(c.data(), c.size());
  EXPECT_FALSE(u16.count().any());
}

TEST(NonfiniteCounter, CountsHalfAndBFloat16) {
  // f16: 0x7c00 = +inf, 0x7e00 = nan, 0x7bff = max finite; bf16: 0x7f80 = +inf, 0xffc0 = nan.
  NonfiniteCounter f16(DType::kF16);
  const auto h = bytes_of<uint16_t>({0x7c00, 0x7e00, 0x7bff, 0x3c00});
  f16.feed(h.data(), h.size());
  EXPECT_EQ(f16.count().nan, 1u);
  EXPECT_EQ(f16.count().inf, 1u);
  NonfiniteCounter bf16(DType::kBF16);
  const auto bf = bytes_of<uint16_t>({0x7f80, 0xffc0, 0x7f7f, 0xff80});
  bf16.feed(bf.data(), bf.size());
  EXPECT_EQ(bf16.count().nan, 1u);
  EXPECT_EQ(bf16.count().inf, 2u);
}

TEST(NonfiniteCounter, ElementsSplitAcrossFeedsAreCountedOnce) {
  const auto b =
      bytes_of<float>({std::numeric_limits<float>::quiet_NaN(), 2.f, std::numeric_limits<float>::infinity()});
  NonfiniteCounter c(DType::kF32);
  for (uint8_t byte : b) c.feed(&byte, 1);
  EXPECT_EQ(c.count().nan, 1u);
  EXPECT_EQ(c.count().inf, 1u);
}

TEST(NonfiniteCounter, IntegersAreNeverCounted) {
  NonfiniteCounter c(DType::kI32);
  const auto b = bytes_of<uint32_t>({0x7fc00000u, 0x7f800000u});
  c.feed(b.data(), b.size());
  EXPECT_FALSE(c.count().any());
  EXPECT_FALSE(c.counts_anything());
}

// Long runs take the lane-wise path: counts must stay exact past the lanes' fold interval (255
// vectors) for every width, wherever the specials sit, including the scalar tail.
TEST(NonfiniteCounter, LongRunsCountExactlyInEveryWidth) {
  struct Case {
    DType dtype;
    size_t width;
    uint64_t nan_bits, inf_bits;
  };
  for (const Case& c : {Case{DType::kF32, 4, 0x7fc00000u, 0x7f800000u}, Case{DType::kF16, 2, 0x7e00, 0x7c00},
                        Case{DType::kBF16, 2, 0x7fc0, 0x7f80}, Case{DType::kF8E5M2, 1, 0x7e, 0x7c},
                        Case{DType::kF64, 8, 0x7ff8000000000000ull, 0x7ff0000000000000ull}}) {
    const size_t elements = 255 * 16 * 3 + 7;  // several folds of the widest lane count, odd tail
    std::vector<uint8_t> bytes(elements * c.width, 0);
    uint64_t nans = 0, infs = 0;
    for (size_t i = 0; i < elements; i += 97) {
      const uint64_t bits = (i / 97) % 3 == 0 ? c.inf_bits : c.nan_bits;
      std::memcpy(bytes.data() + i * c.width, &bits, c.width);  // little-endian host
      ((i / 97) % 3 == 0 ? infs : nans) += 1;
    }
    std::memcpy(bytes.data() + (elements - 1) * c.width, &c.nan_bits, c.width);  // in the tail
    ++nans;
    NonfiniteCounter counter(c.dtype);
    counter.feed(bytes.data(), bytes.size());
    EXPECT_EQ(counter.count().nan, nans) << dtype_name(c.dtype);
    EXPECT_EQ(counter.count().inf, infs) << dtype_name(c.dtype);
    // Every element an Inf: no lane counter may wrap.
    for (size_t i = 0; i < elements; ++i) std::memcpy(bytes.data() + i * c.width, &c.inf_bits, c.width);
    NonfiniteCounter all(c.dtype);
    all.feed(bytes.data(), bytes.size());
    EXPECT_EQ(all.count().inf, elements) << dtype_name(c.dtype);
  }
}

}  // namespace
}  // namespace ckpt
