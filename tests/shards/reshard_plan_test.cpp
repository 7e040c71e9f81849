#include "shards/reshard_plan.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

// A [10, 4] f32 tensor (16-byte rows) split into row ranges [0,3) [3,7) [7,10), listed out of order.
ManifestTensor three_chunks() {
  ManifestTensor t;
  t.name = "model.w";
  t.component = "model";
  t.dtype = DType::kF32;
  t.shape = {10, 4};
  t.chunks.push_back({1, {3, 0}, {4, 4}, 0, 64, ""});
  t.chunks.push_back({0, {0, 0}, {3, 4}, 0, 48, ""});
  t.chunks.push_back({2, {7, 0}, {3, 4}, 0, 48, ""});
  return t;
}

TEST(ReshardPlan, RowsAcrossThreeChunksBecomeByteRangesInsideEach) {
  auto plan = plan_row_reads(three_chunks(), 2, 8);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->target_bytes, 6u * 16);
  ASSERT_EQ(plan->reads.size(), 3u);
  // rows 2..3 of chunk [0,3): its last row
  EXPECT_EQ(plan->reads[0].chunk, 1u);
  EXPECT_EQ(plan->reads[0].chunk_offset, 2u * 16);
  EXPECT_EQ(plan->reads[0].length, 16u);
  EXPECT_EQ(plan->reads[0].target_offset, 0u);
  EXPECT_FALSE(plan->reads[0].whole_chunk);
  // all of chunk [3,7)
  EXPECT_EQ(plan->reads[1].chunk, 0u);
  EXPECT_EQ(plan->reads[1].chunk_offset, 0u);
  EXPECT_EQ(plan->reads[1].length, 64u);
  EXPECT_EQ(plan->reads[1].target_offset, 16u);
  EXPECT_TRUE(plan->reads[1].whole_chunk);
  // row 7 of chunk [7,10): its first row
  EXPECT_EQ(plan->reads[2].chunk, 2u);
  EXPECT_EQ(plan->reads[2].chunk_offset, 0u);
  EXPECT_EQ(plan->reads[2].length, 16u);
  EXPECT_EQ(plan->reads[2].target_offset, 80u);
}

TEST(ReshardPlan, RowsInsideOneChunkReadOnlyThoseRows) {
  auto plan = plan_row_reads(three_chunks(), 4, 6);
  ASSERT_TRUE(plan.is_ok());
  ASSERT_EQ(plan->reads.size(), 1u);
  EXPECT_EQ(plan->reads[0].chunk_offset, 16u);
  EXPECT_EQ(plan->reads[0].length, 32u);
}

TEST(ReshardPlan, WholeTensorReadsEveryChunkWhole) {
  auto plan = plan_row_reads(three_chunks(), 0, 10);
  ASSERT_TRUE(plan.is_ok());
  ASSERT_EQ(plan->reads.size(), 3u);
  for (const auto& r : plan->reads) EXPECT_TRUE(r.whole_chunk);
}

TEST(ReshardPlan, EmptyRangeReadsNothing) {
  auto plan = plan_row_reads(three_chunks(), 5, 5);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_TRUE(plan->reads.empty());
  EXPECT_EQ(plan->target_bytes, 0u);
}

TEST(ReshardPlan, ScalarIsOneRow) {
  ManifestTensor t{"progress.global_step", "progress", DType::kI64, {}, {{0, {}, {}, 0, 8, ""}}};
  auto plan = plan_row_reads(t, 0, 1);
  ASSERT_TRUE(plan.is_ok());
  ASSERT_EQ(plan->reads.size(), 1u);
  EXPECT_EQ(plan->reads[0].length, 8u);
  EXPECT_TRUE(plan->reads[0].whole_chunk);
}

TEST(ReshardPlan, GapIsCorruption) {
  ManifestTensor t = three_chunks();
  t.chunks.erase(t.chunks.begin());  // rows [3,7) missing
  auto plan = plan_row_reads(t, 0, 10);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kCorruption);
  EXPECT_NE(plan.status().message().find("gap"), std::string::npos) << plan.status().message();
}

TEST(ReshardPlan, OverlapIsCorruption) {
  ManifestTensor t = three_chunks();
  t.chunks.push_back({3, {2, 0}, {2, 4}, 0, 32, ""});
  auto plan = plan_row_reads(t, 0, 10);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("overlap"), std::string::npos) << plan.status().message();
}

TEST(ReshardPlan, ColumnSplitChunkIsRefused) {
  ManifestTensor t{"model.w", "model", DType::kF32, {4, 4}, {}};
  t.chunks.push_back({0, {0, 0}, {4, 2}, 0, 32, ""});
  t.chunks.push_back({1, {0, 2}, {4, 2}, 0, 32, ""});
  auto plan = plan_row_reads(t, 0, 4);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("not a row range"), std::string::npos);
}

TEST(ReshardPlan, RowsOutsideTheTensorAreInvalid) {
  auto plan = plan_row_reads(three_chunks(), 8, 11);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ckpt
