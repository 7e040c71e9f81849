#include "verifier/process/launch.h"

#include <gtest/gtest.h>
#include <signal.h>

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

TEST(Launch, GivenPortIsPassedThrough) {
  LaunchOptions o;
  o.nproc_per_node = 1;
  o.master_port = 23456;
  o.argv = {"/bin/sh", "-c", "test \"$MASTER_PORT\" = 23456"};
  auto out = launch_ranks(o);
  ASSERT_TRUE(out.is_ok());
  EXPECT_TRUE(out->all_ok());
}

TEST(Launch, OneFailedRankStopsTheOthersAfterTheGrace) {
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.grace_seconds = 0.2;
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"};
  const auto start = std::chrono::steady_clock::now();
  auto out = launch_ranks(o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(out.is_ok());
  EXPECT_LT(wall, 10.0);  // never waits for the sleepers
  EXPECT_FALSE(out->all_ok());
  const auto lines = out->report_lines();
  EXPECT_EQ(lines[1], "rank 1: exit 3");
  EXPECT_EQ(lines[0], "rank 0: killed by SIGKILL (stopped after another rank failed)");
  EXPECT_TRUE(out->ranks[2].exit.killed_by(SIGKILL));
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
