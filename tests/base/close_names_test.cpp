#include "base/close_names.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

TEST(CloseNames, EditDistanceCountsSingleByteEdits) {
  EXPECT_EQ(edit_distance("verfy", "verify"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(CloseNames, ContainingNamesRankFirstThenByDistance) {
  const std::vector<std::string> options = {"--save-every", "--save-at", "--shards", "--seed"};
  EXPECT_EQ(close_names("--save-a", options), (std::vector<std::string>{"--save-at"}));
  EXPECT_EQ(close_names("--shard", options), (std::vector<std::string>{"--shards", "--seed"}));
  EXPECT_EQ(close_names("--shard", options, 1), (std::vector<std::string>{"--shards"}));
  EXPECT_TRUE(close_names("frobnicate", {"verify", "drill", "inspect"}).empty());
}

TEST(CloseNames, DidYouMeanListsTheNames) {
  EXPECT_EQ(did_you_mean({}), "");
  EXPECT_EQ(did_you_mean({"verify"}), "; did you mean 'verify'?");
  EXPECT_EQ(did_you_mean({"a", "b", "c"}), "; did you mean 'a', 'b' or 'c'?");
}

}  // namespace
}  // namespace ckpt
