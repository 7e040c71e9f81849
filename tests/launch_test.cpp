#include "verifier/launch.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>

#include "fixtures/rank_env.h"

namespace ckpt {
namespace {

std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

TEST(RankEnv, AbsentVariablesAreAWorldOfOne) {
  auto env = read_rank_env(env_of({}));
  ASSERT_TRUE(env.is_ok());
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->rank, 0);
  EXPECT_FALSE(env->from_environment);
}

TEST(RankEnv, ReadsTorchrunsContract) {
  auto env = read_rank_env(env_of({{"RANK", "2"},
                                   {"LOCAL_RANK", "2"},
                                   {"WORLD_SIZE", "3"},
                                   {"MASTER_ADDR", "10.0.0.1"},
                                   {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(env.is_ok()) << env.status().to_string();
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_EQ(env->master_addr, "10.0.0.1");
  EXPECT_EQ(env->master_port, 1234);
}

TEST(RankEnv, RankNotBelowWorldSizeIsAnError) {
  auto env = read_rank_env(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(env.is_ok());
  EXPECT_NE(env.status().message().find("RANK"), std::string::npos);
}

TEST(RankEnv, GarbagePortIsAnErrorNamingIt) {
  auto env = read_rank_env(env_of({{"MASTER_PORT", "80x"}}));
  ASSERT_FALSE(env.is_ok());
  EXPECT_NE(env.status().message().find("MASTER_PORT"), std::string::npos);
}

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
