#include "distributed/rank_env.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

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

}  // namespace
}  // namespace ckpt
