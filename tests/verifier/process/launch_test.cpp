#include "verifier/process/launch.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace ckpt {
namespace {

TEST(Launch, FreePortIsALoopbackPort) {
  auto port = pick_free_loopback_port();
  ASSERT_TRUE(port.is_ok());
  EXPECT_GT(*port, 0);
  EXPECT_LE(*port, 65535);
}

TEST(Launch, EveryRankSeesItsOwnEnvironment) {
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.argv = {"/bin/sh", "-c",
            "test \"$WORLD_SIZE\" = 3 && test \"$RANK\" = \"$LOCAL_RANK\" && test \"$RANK\" -lt 3 && "
            "test \"$MASTER_ADDR\" = 127.0.0.1 && test \"$MASTER_PORT\" -gt 0 && exit 0; exit 9"};
  auto out = launch_ranks(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  ASSERT_EQ(out->ranks.size(), 3u);
  EXPECT_TRUE(out->all_ok());
  EXPECT_GT(out->master_port, 0);
  EXPECT_EQ(out->report_lines()[2], "rank 2: exit 0");
}

TEST(Launch, TorchrunsWholeEnvironmentForNodeOneOfTwo) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "10.0.0.7";
  const auto env = torchrun_environment(o, 1, 29500, false);
  const std::vector<std::string> want = {"RANK=3",
                                         "LOCAL_RANK=1",
                                         "WORLD_SIZE=4",
                                         "LOCAL_WORLD_SIZE=2",
                                         "GROUP_RANK=1",
                                         "ROLE_RANK=3",
                                         "ROLE_WORLD_SIZE=4",
                                         "ROLE_NAME=default",
                                         "MASTER_ADDR=10.0.0.7",
                                         "MASTER_PORT=29500",
                                         "OMP_NUM_THREADS=1"};
  EXPECT_EQ(env, want);
  // A user's OMP_NUM_THREADS is kept (not overridden).
  const auto kept = torchrun_environment(o, 0, 29500, true);
  EXPECT_EQ(std::count(kept.begin(), kept.end(), "OMP_NUM_THREADS=1"), 0);
}

TEST(Launch, SeveralNodesNeedAGivenPortAndAValidNodeRank) {
  LaunchOptions o;
  o.argv = {"/bin/true"};
  o.nnodes = 2;
  auto r = launch_ranks(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("master_port"), std::string::npos) << r.status().to_string();
  o.master_port = 29511;
  o.node_rank = 2;
  r = launch_ranks(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("node_rank 2 is not in 0..1"), std::string::npos)
      << r.status().to_string();
}

TEST(Launch, GivenPortIsPassedThrough) {
  LaunchOptions o;
  o.nproc_per_node = 1;
  o.master_port = 23456;
  o.argv = {"/bin/sh", "-c", "test \"$MASTER_PORT\" = 23456"};
  auto out = launch_ranks(o);
  ASSERT_TRUE(out.is_ok());
  EXPECT_TRUE(out->all_ok());
}

// Launches ranks of which some sleep for a minute, and expects the launch to stop them instead of
// waiting: well under 10 s, and failed.
LaunchOutcome launch_stopping_the_sleepers(const LaunchOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  auto out = launch_ranks(o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_LT(wall, 10.0);
  if (!out.is_ok()) return {};
  EXPECT_FALSE(out->all_ok());
  return *out;
}

TEST(Launch, OneFailedRankStopsTheOthersAfterTheGrace) {
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.grace_seconds = 0.2;
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"};
  const LaunchOutcome out = launch_stopping_the_sleepers(o);
  ASSERT_EQ(out.ranks.size(), 3u);
  const auto lines = out.report_lines();
  EXPECT_EQ(lines[1], "rank 1: exit 3");
  EXPECT_EQ(lines[0], "rank 0: killed by SIGKILL (stopped after another rank failed)");
  EXPECT_TRUE(out.ranks[2].exit.killed_by(SIGKILL));
}

TEST(Launch, ARankStillRunningAfterAnotherFinishedIsStoppedAndFails) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.finish_window_seconds = 0.3;
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 0 ]; then exit 0; fi; exec sleep 60"};
  const LaunchOutcome out = launch_stopping_the_sleepers(o);
  ASSERT_EQ(out.ranks.size(), 2u);
  const auto lines = out.report_lines();
  EXPECT_EQ(lines[0], "rank 0: exit 0");
  EXPECT_EQ(lines[1],
            "rank 1: killed by SIGKILL (still running after another rank had exited 0: stopped at the end of "
            "the finish window)");
}

TEST(Launch, RanksFinishingWithinTheWindowAllPass) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.finish_window_seconds = 30;
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then sleep 0.5; fi; exit 0"};
  auto out = launch_ranks(o);
  ASSERT_TRUE(out.is_ok());
  EXPECT_TRUE(out->all_ok());
}

TEST(Launch, RankKilledBySignalIsReportedByName) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.grace_seconds = 0.2;
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exit 0"};
  auto out = launch_ranks(o);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->report_lines()[0], "rank 0: killed by SIGKILL");
  EXPECT_FALSE(out->all_ok());
}

TEST(Launch, NoCommandIsAnError) {
  LaunchOptions o;
  EXPECT_FALSE(launch_ranks(o).is_ok());
}

}  // namespace
}  // namespace ckpt
