#include "verifier/tensors/tensor_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::bytes_of;

TEST(TensorStats, F32HandChecked) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const auto b = bytes_of<float>({1, -2, 3, nan, -inf, 4});
  TensorStatsAccumulator acc(DType::kF32);
  acc.feed(b.data(), b.size());
  const TensorStats& s = acc.stats();
  EXPECT_EQ(s.elements, 6u);
  EXPECT_EQ(s.finite, 4u);
  EXPECT_EQ(s.nan, 1u);
  EXPECT_EQ(s.inf, 1u);
  EXPECT_EQ(s.min, -2);
  EXPECT_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.mean(), 1.5);                 // (1 - 2 + 3 + 4) / 4
  EXPECT_DOUBLE_EQ(s.l2_norm(), std::sqrt(30.0));  // 1 + 4 + 9 + 16
}

TEST(TensorStats, ElementsSplitAcrossFeedsAreCarried) {
  const auto b = bytes_of<double>({0.25, -8, 16.5});
  TensorStatsAccumulator whole(DType::kF64), bytewise(DType::kF64);
  whole.feed(b.data(), b.size());
  for (size_t i = 0; i < b.size(); ++i) bytewise.feed(&b[i], 1);
  EXPECT_EQ(bytewise.stats().elements, 3u);
  EXPECT_EQ(bytewise.stats().min, -8);
  EXPECT_EQ(bytewise.stats().max, 16.5);
  EXPECT_DOUBLE_EQ(bytewise.stats().mean(), whole.stats().mean());
  EXPECT_DOUBLE_EQ(bytewise.stats().l2_norm(), whole.stats().l2_norm());
}

TEST(TensorStats, F32RunsSplitAnywhereGiveTheSameStats) {
  // The F32 path folds each run's partial sums in; runs that start with only NaN/Inf, or with
  // an element split across feeds, must not disturb min, max or the counts.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const auto b = bytes_of<float>({nan, -inf, 2.5f, -7, 0.5f, inf, 9, nan, -1});
  TensorStatsAccumulator whole(DType::kF32), bytewise(DType::kF32);
  whole.feed(b.data(), b.size());
  for (size_t i = 0; i < b.size(); ++i) bytewise.feed(&b[i], 1);
  for (const TensorStats* s : {&whole.stats(), &bytewise.stats()}) {
    EXPECT_EQ(s->elements, 9u);
    EXPECT_EQ(s->finite, 5u);
    EXPECT_EQ(s->nan, 2u);
    EXPECT_EQ(s->inf, 2u);
    EXPECT_EQ(s->min, -7);
    EXPECT_EQ(s->max, 9);
    EXPECT_DOUBLE_EQ(s->mean(), 4.0 / 5);                                  // 2.5 - 7 + 0.5 + 9 - 1
    EXPECT_DOUBLE_EQ(s->l2_norm(), std::sqrt(6.25 + 49 + 0.25 + 81 + 1));  // 137.5
  }
}

TEST(TensorStats, Bf16AndF16AreDecoded) {
  // bf16 0x3FC0 = 1.5, 0xBF00 = -0.5, 0x7FC0 = NaN; f16 0x3C00 = 1, 0xC000 = -2, 0x7C00 = +inf.
  const auto bf = bytes_of<uint16_t>({0x3FC0, 0xBF00, 0x7FC0});
  TensorStatsAccumulator a(DType::kBF16);
  a.feed(bf.data(), bf.size());
  EXPECT_EQ(a.stats().min, -0.5);
  EXPECT_EQ(a.stats().max, 1.5);
  EXPECT_DOUBLE_EQ(a.stats().mean(), 0.5);
  EXPECT_DOUBLE_EQ(a.stats().l2_norm(), std::sqrt(2.5));
  EXPECT_EQ(a.stats().nan, 1u);
  const auto h = bytes_of<uint16_t>({0x3C00, 0xC000, 0x7C00});
  TensorStatsAccumulator f(DType::kF16);
  f.feed(h.data(), h.size());
  EXPECT_EQ(f.stats().min, -2);
  EXPECT_EQ(f.stats().max, 1);
  EXPECT_EQ(f.stats().inf, 1u);
}

TEST(TensorStats, IntegersAndEmpty) {
  const auto b = bytes_of<int64_t>({-3, 10, 2});
  TensorStatsAccumulator acc(DType::kI64);
  acc.feed(b.data(), b.size());
  EXPECT_EQ(acc.stats().min, -3);
  EXPECT_EQ(acc.stats().max, 10);
  EXPECT_DOUBLE_EQ(acc.stats().mean(), 3);
  EXPECT_EQ(acc.stats().nan + acc.stats().inf, 0u);
  TensorStatsAccumulator empty(DType::kF32);
  EXPECT_EQ(empty.stats().elements, 0u);
  EXPECT_EQ(empty.stats().mean(), 0);
  const auto j = to_json(acc.stats());
  EXPECT_EQ(j["max"], 10);
  EXPECT_EQ(j["elements"], 3);
}

}  // namespace
}  // namespace ckpt
