#include "base/dims.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace ckpt {
namespace {

std::vector<int64_t> counting(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(10 * i + 1);
  return v;
}

// Every length around the inline capacity, built each way a manifest's parse and writer build
// them, holds exactly its extents; copies and moves keep them, and a moved-from Dims is empty and
// usable again.
TEST(Dims, HoldsItsExtentsInlineOrOnTheHeapWhateverTheLength) {
  for (size_t n = 0; n <= 3 * Dims::kInline; ++n) {
    const std::vector<int64_t> want = counting(n);
    Dims pushed;
    for (int64_t d : want) pushed.push_back(d);
    const Dims from_vector(want);
    const Dims from_view(DimsView{want});
    for (const Dims* d : std::vector<const Dims*>{&pushed, &from_vector, &from_view}) {
      ASSERT_EQ(d->size(), n);
      EXPECT_EQ(d->to_vector(), want);
      EXPECT_EQ(DimsView(*d), DimsView(want));
    }
    Dims copy = pushed;
    EXPECT_EQ(copy.to_vector(), want);
    Dims assigned = {7};
    assigned = from_vector;
    EXPECT_EQ(assigned.to_vector(), want);
    Dims moved = std::move(copy);
    EXPECT_EQ(moved.to_vector(), want);
    EXPECT_TRUE(copy.empty());  // NOLINT: what a moved-from Dims holds is part of the contract
    copy.push_back(5);
    EXPECT_EQ(copy.to_vector(), std::vector<int64_t>{5});
    Dims move_assigned = counting(2 * Dims::kInline);
    move_assigned = std::move(moved);
    EXPECT_EQ(move_assigned.to_vector(), want);
    assigned = assigned;  // NOLINT: self-assignment keeps the extents
    EXPECT_EQ(assigned.to_vector(), want);
  }
}

TEST(Dims, ComparesAsTheVectorsOfItsExtentsCompare) {
  const std::vector<std::vector<int64_t>> all = {
      {}, {0}, {0, 1}, {1}, {1, 0}, {1, 0, 0, 0, 0}, {1, 0, 0, 0, 1}, {2}};
  for (const auto& a : all) {
    for (const auto& b : all) {
      EXPECT_EQ(Dims(a) == Dims(b), a == b);
      EXPECT_EQ(Dims(a) != Dims(b), a != b);
      EXPECT_EQ(Dims(a) < Dims(b), a < b);
      EXPECT_EQ(DimsView(a) == DimsView(b), a == b);
      EXPECT_EQ(DimsView(a) < DimsView(b), a < b);
    }
  }
}

}  // namespace
}  // namespace ckpt
