#include "shards/retention.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/file_io.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;

// A listing of committed checkpoints at these steps under /r, `latest` naming `latest_step`
// (-1: no latest file).
CheckpointListing listing_of(const std::vector<int64_t>& steps, int64_t latest_step) {
  CheckpointListing listing;
  for (int64_t s : steps) listing.committed.push_back("/r/" + step_dir_name(s));
  if (latest_step >= 0) listing.latest_pointer = step_dir_name(latest_step);
  return listing;
}

std::vector<std::string> dirs(const std::vector<int64_t>& steps) {
  std::vector<std::string> out;
  for (int64_t s : steps) out.push_back("/r/" + step_dir_name(s));
  return out;
}

TEST(RetentionPlan, KeepLastKeepsTheNewestN) {
  const auto plan = plan_retention(listing_of({2, 4, 6, 8, 10}, 10), {2, 0});
  EXPECT_EQ(plan.keep, dirs({8, 10}));
  EXPECT_EQ(plan.remove, dirs({2, 4, 6}));
  EXPECT_TRUE(plan.leftovers.empty());
}

TEST(RetentionPlan, KeepEveryAlsoKeepsMultiplesOfM) {
  // keep-last 2 -> 12, 14; keep-every 4 -> 4, 8, 12.
  const auto plan = plan_retention(listing_of({2, 4, 6, 8, 10, 12, 14}, 14), {2, 4});
  EXPECT_EQ(plan.keep, dirs({4, 8, 12, 14}));
  EXPECT_EQ(plan.remove, dirs({2, 6, 10}));
}

TEST(RetentionPlan, LatestIsNeverRemovedEvenWhenOlderThanTheLastN) {
  // `latest` names step 4 (a newer save's pointer update was lost, or it was set by hand).
  const auto plan = plan_retention(listing_of({2, 4, 6, 8}, 4), {1, 0});
  EXPECT_EQ(plan.keep, dirs({4, 8}));
  EXPECT_EQ(plan.remove, dirs({2, 6}));
}

TEST(RetentionPlan, WithoutAUsableLatestTheHighestStepIsProtected) {
  // `latest` names a dir that is not committed: resolve_latest_checkpoint falls back to the highest.
  const auto plan = plan_retention(listing_of({2, 4, 6}, 9), {1, 0});
  EXPECT_EQ(plan.keep, dirs({6}));
  EXPECT_EQ(plan.remove, dirs({2, 4}));
  const auto no_pointer = plan_retention(listing_of({2, 4, 6}, -1), {1, 0});
  EXPECT_EQ(no_pointer.keep, dirs({6}));
}

TEST(RetentionPlan, FewerCheckpointsThanNRemovesNothing) {
  const auto plan = plan_retention(listing_of({2, 4}, 4), {3, 0});
  EXPECT_EQ(plan.keep, dirs({2, 4}));
  EXPECT_TRUE(plan.remove.empty());
  EXPECT_TRUE(plan_retention(listing_of({}, -1), {3, 0}).keep.empty());
}

TEST(RetentionPlan, ProtectedCheckpointStaysWhenOlderThanTheLastN) {
  // A run resumed from step 2 just committed step 3 while 6 and 8 exist (latest stays at 8).
  const auto plan = plan_retention(listing_of({2, 3, 6, 8}, 8), {1, 0}, "/r/step_00000003");
  EXPECT_EQ(plan.keep, dirs({3, 8}));
  EXPECT_EQ(plan.remove, dirs({2, 6}));
  // A base name protects as well as a full path.
  EXPECT_EQ(plan_retention(listing_of({2, 3, 6, 8}, 8), {1, 0}, "step_00000003").keep, dirs({3, 8}));
}

TEST(RetentionPlan, NoPolicyKeepsEverythingAndLeftoversAreFinished) {
  auto listing = listing_of({2, 4, 6}, 6);
  listing.uncommitted = {"/r/.deleting-step_00000001-77", "/r/.tmp-step_00000008-78"};
  const auto plan = plan_retention(listing, {0, 0});
  EXPECT_EQ(plan.keep, dirs({2, 4, 6}));
  EXPECT_TRUE(plan.remove.empty());
  // Only an interrupted prune's dir; a torn save's temp dir is not retention's to delete.
  EXPECT_EQ(plan.leftovers, std::vector<std::string>{"/r/.deleting-step_00000001-77"});
}

void commit_kept_step(const std::string& root, int64_t step) {
  auto tx = CheckpointTransaction::begin(root, step);
  ASSERT_TRUE(tx.is_ok()) << tx.status().to_string();
  ASSERT_TRUE(write_file_atomically(tx->temp_dir() + "/shard.bin", "payload").is_ok());
  ASSERT_TRUE(tx->commit("{}").is_ok());
}

TEST(PruneCheckpoints, DeletesWhatThePlanRemovesAndFinishesLeftovers) {
  TempDir root;
  for (int64_t s : {2, 4, 6, 8}) commit_kept_step(root.path(), s);
  ASSERT_TRUE(make_directory(root / ".deleting-step_00000001-1/sub").is_ok());
  auto pruned = prune_checkpoints(root.path(), {2, 0});
  ASSERT_TRUE(pruned.is_ok()) << pruned.status().to_string();
  EXPECT_EQ(pruned->removed, (std::vector<std::string>{root / "step_00000002", root / "step_00000004"}));
  EXPECT_EQ(pruned->leftovers_removed, std::vector<std::string>{root / ".deleting-step_00000001-1"});
  const auto listing = list_checkpoints(root.path());
  EXPECT_EQ(listing.committed, (std::vector<std::string>{root / "step_00000006", root / "step_00000008"}));
  EXPECT_TRUE(listing.uncommitted.empty());
  EXPECT_FALSE(path_exists(root / ".deleting-step_00000002-" + std::to_string(::getpid())));
}

TEST(PruneCheckpoints, MidPruneTheVictimIsRenamedAwayAndListedAsALeftover) {
  TempDir root;
  for (int64_t s : {2, 4, 6}) commit_kept_step(root.path(), s);
  int calls = 0;
  PruneHooks hooks;
  hooks.after_first_rename = [&](const std::string& renamed) {
    ++calls;
    // What a SIGKILL right here leaves: the old name is gone, the tree is whole under a name that
    // no reader takes for a checkpoint, and latest is untouched.
    EXPECT_EQ(renamed, root / ".deleting-step_00000002-" + std::to_string(::getpid()));
    EXPECT_TRUE(is_regular_file(renamed + "/shard.bin"));
    const auto listing = list_checkpoints(root.path());
    EXPECT_EQ(listing.committed, (std::vector<std::string>{root / "step_00000004", root / "step_00000006"}));
    EXPECT_EQ(listing.uncommitted, std::vector<std::string>{renamed});
    EXPECT_EQ(*resolve_latest_checkpoint(root.path()), root / "step_00000006");
  };
  auto pruned = prune_checkpoints(root.path(), {1, 0}, "", hooks);
  ASSERT_TRUE(pruned.is_ok()) << pruned.status().to_string();
  EXPECT_EQ(calls, 1);  // once, though two checkpoints were removed
  EXPECT_EQ(pruned->removed.size(), 2u);
  EXPECT_EQ(list_checkpoints(root.path()).committed, std::vector<std::string>{root / "step_00000006"});
}

TEST(PruneCheckpoints, NoPolicyTouchesNothing) {
  TempDir root;
  for (int64_t s : {2, 4}) commit_kept_step(root.path(), s);
  ASSERT_TRUE(make_directory(root / ".deleting-step_00000001-1").is_ok());
  auto pruned = prune_checkpoints(root.path(), {0, 0});
  ASSERT_TRUE(pruned.is_ok());
  EXPECT_TRUE(pruned->removed.empty());
  EXPECT_EQ(list_checkpoints(root.path()).committed.size(), 2u);
  EXPECT_TRUE(path_exists(root / ".deleting-step_00000001-1"));
}

}  // namespace
}  // namespace ckpt
