// The writer's manifest text read a tensor at a time (shards/manifest_tensor_pieces.h and
// shards/manifest_fast_parse.h): the locator finds every tensor of the text the writer writes, and a
// text that only looks like that layout (whitespace moved, separators changed, the pattern inside
// another member) is read whole or refused exactly as before.
#include "shards/manifest_tensor_pieces.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "shards/manifest.h"
#include "shards/manifest_fast_parse.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

// Names that put the locator's patterns inside strings (escaped, as JSON must spell a newline),
// a scalar, a tensor of no chunks, and a config holding a "tensors" member of its own.
Manifest layout_manifest() {
  Manifest m;
  m.step = 7;
  m.created_utc = "2026-12-05T20:00:00Z";
  m.world_size = 2;
  m.strategy = "fsdp";
  m.config = {{"zz", {{"tensors", {7}}}}};
  m.shards.push_back({"shard-0.cks", "native", 4096, std::string(64, 'a'), 0, "file"});
  m.shards.push_back({"shard-1.cks", "native", 4096, std::string(64, 'b'), 1, "file"});
  ManifestTensor w{"model.w\n  },\n  {", "model", DType::kF32, {8, 4}, {}};
  w.chunks.push_back({0, {0, 0}, {4, 4}, 128, 64, *digest_from_hex(std::string(64, 'c'))});
  w.chunks.push_back({1, {4, 0}, {4, 4}, 0, 64, *digest_from_hex(std::string(64, 'd'))});
  ManifestTensor scalar{"optimizer.step }", "optimizer", DType::kI64, {}, {}};
  scalar.chunks.push_back({0, {}, {}, 1 << 20, 8, *digest_from_hex(std::string(64, 'e'))});
  ManifestTensor empty{"z.empty", "", DType::kBF16, {0}, {}};
  m.tensors = {w, scalar, empty};
  return m;
}

TEST(ManifestTensorPieces, FindsEachTensorOfTheWritersText) {
  const Manifest m = layout_manifest();
  const std::string text = manifest_to_json_text(m);
  const std::optional<TensorsArraySpan> span = find_writer_tensors_array(text);
  ASSERT_TRUE(span.has_value());
  EXPECT_EQ(text[span->open], '[');
  EXPECT_EQ(text[span->close], ']');
  const nlohmann::json tensors = nlohmann::json::parse(text)["tensors"];
  size_t at = span->open + 1;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const std::optional<TextPiece> piece = next_writer_tensor(text, at, span->close);
    ASSERT_TRUE(piece.has_value()) << i;
    EXPECT_EQ(nlohmann::json::parse(text.substr(piece->begin, piece->end - piece->begin)), tensors[i]) << i;
    at = skip_json_space(text, piece->end, span->close);
    if (i + 1 < m.tensors.size()) {
      ASSERT_EQ(text[at], ',');
      ++at;
    }
  }
  EXPECT_EQ(at, span->close);
  EXPECT_FALSE(next_writer_tensor(text, at, span->close).has_value());

  // Text laid out otherwise has no such array: compact, another indent, no tensors.
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_FALSE(find_writer_tensors_array(j.dump()).has_value());
  EXPECT_FALSE(find_writer_tensors_array(j.dump(2)).has_value());
  Manifest none = m;
  none.tensors.clear();
  EXPECT_FALSE(find_writer_tensors_array(manifest_to_json_text(none)).has_value());
}

// The writer's text is read a tensor at a time, with the records and digest of the whole read.
TEST(ManifestFastParse, ReadsTheWritersTextOneTensorAtATime) {
  const std::string text = manifest_to_json_text(layout_manifest());
  ManifestDigest digest;
  bool by_tensor = false;
  const std::optional<Manifest> fast = parse_manifest_fast(text, &digest, &by_tensor);
  ASSERT_TRUE(fast.has_value());
  EXPECT_TRUE(by_tensor);
  EXPECT_EQ(manifest_to_json_text(*fast), text);
  EXPECT_TRUE(digest.matches());
  EXPECT_EQ(digest.computed, manifest_digest(text, "manifest.json")->computed);
  // Without the room simdjson reads past the end (a copy is then parsed), the same.
  std::string tight = text;
  tight.shrink_to_fit();
  ASSERT_TRUE(parse_manifest_fast(tight, &digest, &by_tensor).has_value());
  EXPECT_TRUE(by_tensor);
}

// Whitespace moved so that the patterns lie elsewhere: the same content, read whole.
TEST(ManifestFastParse, TextThatOnlyLooksLikeTheWritersLayoutIsReadWhole) {
  const std::string text = manifest_to_json_text(layout_manifest());
  const std::vector<std::string> moved = {
      // The config's own "tensors" line, moved out to the root's indent, is found first.
      testing::replaced_once(text, "\n   \"tensors\": [", "\n \"tensors\": ["),
      // A chunk's closing brace at a tensor's indent: the first piece ends inside its tensor.
      testing::replaced_once(text, "\n    },\n    {", "\n  },\n    {"),
      // The array's end not on a line of its own.
      testing::replaced_once(text, "\n ],\n \"version\"", "],\n \"version\""),
  };
  for (const std::string& other : moved) {
    ASSERT_NE(other, text);
    ManifestDigest digest;
    bool by_tensor = true;
    const std::optional<Manifest> fast = parse_manifest_fast(other, &digest, &by_tensor);
    ASSERT_TRUE(fast.has_value()) << other;
    EXPECT_FALSE(by_tensor) << other;
    EXPECT_EQ(manifest_to_json_text(*fast), text);
    EXPECT_TRUE(digest.matches());
  }
}

// Between two tensors only whitespace and one comma: anything else is refused, as the whole
// text's parse refuses it, and the reference path names the error.
TEST(ManifestFastParse, WhatLiesBetweenTheWritersTensorsIsCheckedAsInTheWholeText) {
  const std::string text = manifest_to_json_text(layout_manifest());
  const std::string between = "\n  },\n  {";
  const std::vector<std::string> broken = {
      testing::replaced_once(text, between, "\n  },,\n  {"),
      testing::replaced_once(text, between, "\n  } 1,\n  {"),
      testing::replaced_once(text, between, "\n  }\n  {"),
      testing::replaced_once(text, "\n  }\n ]", "\n  },\n ]"),
      testing::replaced_once(text, "\n  }\n ]", "\n  }\n  7\n ]"),
  };
  for (const std::string& other : broken) {
    ManifestDigest digest;
    EXPECT_FALSE(parse_manifest_fast(other, &digest).has_value()) << other;
    EXPECT_FALSE(parse_manifest(other, "manifest.json").is_ok()) << other;
  }
}

}  // namespace
}  // namespace ckpt
