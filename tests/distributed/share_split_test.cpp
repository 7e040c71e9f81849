// The split every task of a distributed verify computes alike, and the step-named gather that
// catches tasks gone different ways.
#include "distributed/share_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "distributed/step_gather.h"

namespace ckpt {
namespace {

TEST(SplitBySize, SameSizesGiveTheSameSplitAndEveryUnitOneOwner) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> sizes(1000);
  for (auto& s : sizes) s = 1 + rng() % (64ull << 20);
  const std::vector<int> a = split_by_size(sizes, 8);
  EXPECT_EQ(a, split_by_size(sizes, 8));
  ASSERT_EQ(a.size(), sizes.size());
  for (int owner : a) {
    EXPECT_GE(owner, 0);
    EXPECT_LT(owner, 8);
  }
}

TEST(SplitBySize, LargestShareExceedsTheMeanByAtMostTheLargestUnit) {
  std::mt19937_64 rng(11);
  for (int tasks : {2, 8, 64}) {
    std::vector<uint64_t> sizes(4096);
    for (auto& s : sizes) s = (1ull << 20) + rng() % (63ull << 20);
    const auto shares = share_bytes(sizes, split_by_size(sizes, tasks), tasks);
    const uint64_t total = std::accumulate(shares.begin(), shares.end(), uint64_t{0});
    EXPECT_EQ(total, std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}));
    const double mean = static_cast<double>(total) / tasks;
    EXPECT_LE(static_cast<double>(*std::max_element(shares.begin(), shares.end())),
              mean + static_cast<double>(*std::max_element(sizes.begin(), sizes.end())));
    EXPECT_LE(share_balance(shares), 1.05) << tasks << " tasks";
  }
}

TEST(SplitBySize, OneTaskTakesAllAndSpareTasksGetNothing) {
  EXPECT_EQ(split_by_size({5, 3, 9}, 1), (std::vector<int>{0, 0, 0}));
  // Largest first, each to the least loaded task, ties to the lowest rank.
  EXPECT_EQ(split_by_size({5, 3, 9}, 4), (std::vector<int>{1, 2, 0}));
  EXPECT_DOUBLE_EQ(share_balance({0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(share_balance({3, 1}), 1.5);
}

// Hands back canned messages, as if the other tasks had sent them.
class CannedCollective final : public ByteCollective {
 public:
  explicit CannedCollective(std::vector<std::string> others) : others_(std::move(others)) {}
  int rank() const override { return 0; }
  int world_size() const override { return static_cast<int>(others_.size()) + 1; }
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override {
    std::vector<std::string> all{bytes};
    all.insert(all.end(), others_.begin(), others_.end());
    return all;
  }

 private:
  std::vector<std::string> others_;
};

TEST(StepGather, StripsTheStepName) {
  CannedCollective world({"verify: scan\nhello"});
  auto all = all_gather_step(world, "verify: scan", "mine");
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  EXPECT_EQ(*all, (std::vector<std::string>{"mine", "hello"}));
}

TEST(StepGather, ATaskAtAnotherStepIsAnErrorNamingBothSteps) {
  CannedCollective world({"verify: report\n{\"ok\":false}"});
  auto all = all_gather_step(world, "verify: plan", "2");
  ASSERT_FALSE(all.is_ok());
  EXPECT_NE(all.status().message().find(
                "rank 1 of 2 is at step 'verify: report' while rank 0 is at 'verify: plan'"),
            std::string::npos)
      << all.status().message();
}

}  // namespace
}  // namespace ckpt
