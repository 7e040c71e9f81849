#include "base/json_fields.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(ParseJson, NestingUpToTheBoundParses) {
  auto j = parse_json(nested(kMaxJsonDepth), "t.json");
  ASSERT_TRUE(j.is_ok()) << j.status().to_string();
  EXPECT_TRUE(j->is_array());
}

TEST(ParseJson, OneLevelDeeperIsCorruptionNamingTheOffset) {
  auto j = parse_json(nested(kMaxJsonDepth + 1), "t.json");
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(j.status().message(), "t.json @128: JSON nests deeper than 128 levels");
}

TEST(ParseJson, ObjectsCountLikeArrays) {
  std::string text;
  for (size_t i = 0; i <= kMaxJsonDepth; ++i) text += "{\"a\":";
  text += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_FALSE(parse_json(text, "t.json").is_ok());
}

// Brackets inside strings are text, escaped quotes do not end a string.
TEST(ParseJson, BracketsInsideStringsDoNotCount) {
  const std::string text = "{\"s\": \"" + nested(1000) + "\\\"" + std::string(1000, '[') + "\"}";
  auto j = parse_json(text, "t.json");
  ASSERT_TRUE(j.is_ok()) << j.status().to_string();
  EXPECT_EQ((*j)["s"].get<std::string>().size(), 3001u);
}

TEST(ParseJson, SyntaxErrorIsCorruption) {
  auto j = parse_json("{\"a\": ", "t.json");
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), StatusCode::kCorruption);
  EXPECT_NE(j.status().message().find("t.json"), std::string::npos);
}

}  // namespace
}  // namespace ckpt
