#include "verifier/check/chunk_coverage.h"

#include <gtest/gtest.h>

#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {
namespace {

ManifestTensor tensor(std::vector<int64_t> shape,
                      std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> boxes) {
  ManifestTensor t{"w", "model", DType::kF32, std::move(shape), {}};
  for (auto& [offsets, chunk_shape] : boxes) t.chunks.push_back({0, offsets, chunk_shape, 0, 0, ""});
  return t;
}

VerifyReport coverage(const ManifestTensor& t) {
  VerifyReport r;
  check_chunk_coverage(t, r);
  return r;
}

TEST(ChunkCoverage, RowSplitTilesExactly) {
  EXPECT_TRUE(coverage(tensor({10, 4}, {{{0, 0}, {3, 4}}, {{3, 0}, {3, 4}}, {{6, 0}, {4, 4}}})).ok());
}

TEST(ChunkCoverage, TwoDimensionalGridTilesExactly) {
  EXPECT_TRUE(
      coverage(tensor({4, 6}, {{{2, 3}, {2, 3}}, {{0, 0}, {2, 3}}, {{0, 3}, {2, 3}}, {{2, 0}, {2, 3}}}))
          .ok());
}

TEST(ChunkCoverage, MissingRowsAreAGapNamingTheRows) {
  const VerifyReport r = coverage(tensor({10, 4}, {{{0, 0}, {3, 4}}, {{6, 0}, {4, 4}}}));
  ASSERT_TRUE(r.has_error(verify_code::kCoverageGap));
  EXPECT_NE(r.errors[0].message.find("rows 3:6"), std::string::npos) << r.errors[0].message;
}

TEST(ChunkCoverage, MissingGridCellIsAGap) {
  EXPECT_TRUE(coverage(tensor({4, 6}, {{{0, 0}, {2, 3}}, {{0, 3}, {2, 3}}, {{2, 0}, {2, 3}}}))
                  .has_error(verify_code::kCoverageGap));
}

TEST(ChunkCoverage, OverlapIsFoundEvenWhenVolumesAddUp) {
  // 3 + 3 + 4 = 10 rows of volume, but rows 2..3 are covered twice and row 9 not at all.
  const VerifyReport r = coverage(tensor({10, 4}, {{{0, 0}, {3, 4}}, {{2, 0}, {3, 4}}, {{5, 0}, {4, 4}}}));
  EXPECT_TRUE(r.has_error(verify_code::kCoverageOverlap));
}

TEST(ChunkCoverage, OverlapInAGridIsFoundAcrossTheSweep) {
  const VerifyReport r = coverage(tensor({4, 6}, {{{0, 0}, {4, 3}}, {{0, 3}, {2, 3}}, {{1, 2}, {3, 4}}}));
  EXPECT_TRUE(r.has_error(verify_code::kCoverageOverlap));
}

TEST(ChunkCoverage, OutOfBoundsAndWrongRank) {
  EXPECT_TRUE(coverage(tensor({4}, {{{2}, {3}}})).has_error(verify_code::kChunkOutOfBounds));
  EXPECT_TRUE(coverage(tensor({4}, {{{0, 0}, {4, 1}}})).has_error(verify_code::kChunkOutOfBounds));
}

TEST(ChunkCoverage, ScalarNeedsExactlyOneChunk) {
  EXPECT_TRUE(coverage(tensor({}, {{{}, {}}})).ok());
  EXPECT_TRUE(coverage(tensor({}, {})).has_error(verify_code::kCoverageGap));
  EXPECT_TRUE(coverage(tensor({}, {{{}, {}}, {{}, {}}})).has_error(verify_code::kCoverageOverlap));
}

TEST(ChunkCoverage, EmptyTensorNeedsNoChunks) {
  EXPECT_TRUE(coverage(tensor({0, 4}, {})).ok());
}

TEST(ChunkCoverage, ManyRowChunksStayFast) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> boxes;
  for (int64_t i = 100000; i-- > 0;) boxes.push_back({{i, 0}, {1, 8}});
  EXPECT_TRUE(coverage(tensor({100000, 8}, boxes)).ok());
}

}  // namespace
}  // namespace ckpt
