// The simdjson reader of native shard headers against the reference (ChunkInfo::from_json over
// nlohmann): what the writer writes is read the same; anything else is left to the reference.
#include "formats/native_header_fast_parse.h"

#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

ChunkInfo a_chunk(const std::string& name, int64_t row) {
  ChunkInfo c;
  c.name = name;
  c.component = "model";
  c.dtype = DType::kF32;
  c.global_shape = {8, 4};
  c.offsets = {row, 0};
  c.shape = {4, 4};
  c.data_offset = static_cast<uint64_t>(row) * 16;
  c.data_bytes = 64;
  c.sha256 = std::string(64, 'a');
  return c;
}

std::string header_text(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json chunks = nlohmann::json::array();
  for (const ChunkInfo& c : {a_chunk("model.w", 0), a_chunk("model.w", 4), a_chunk("na\xc3\xafve \"q\"", 0)})
    chunks.push_back(c.to_json());
  nlohmann::json header = {{"format", "ckptcheck.native-shard"},
                           {"chunks", chunks},
                           {"metadata", {{"step", 7}, {"nested", {{"big", 18446744073709551615ull}}}}}};
  header.update(extra);
  return header.dump();
}

TEST(NativeHeaderFastParse, ReadsWhatTheWriterWritesAsTheReferenceDoes) {
  const std::string text = header_text();
  const auto fast = parse_native_header_fast(text, 100);
  ASSERT_TRUE(fast.has_value());
  const nlohmann::json reference = nlohmann::json::parse(text);
  ASSERT_EQ(fast->chunks.size(), reference["chunks"].size());
  for (size_t i = 0; i < fast->chunks.size(); ++i) {
    auto expected = ChunkInfo::from_json(reference["chunks"][i], "header");
    ASSERT_TRUE(expected.is_ok());
    EXPECT_EQ(fast->chunks[i].to_json(), expected->to_json()) << i;
  }
  EXPECT_EQ(fast->metadata, reference["metadata"]);
  EXPECT_TRUE(fast->metadata["nested"]["big"].is_number_unsigned());
}

// Strings are read in place unless they hold an escape: a key or value spelled with one is
// unescaped as before, and reads as the reference reads it.
TEST(NativeHeaderFastParse, ReadsEscapedKeysAndValuesAsTheReferenceDoes) {
  const std::string text =
      testing::replaced_once(header_text(), "\"name\":\"model.w\"", "\"n\\u0061me\":\"model.\\u0077\\t\"");
  ASSERT_NE(text, header_text());
  const auto fast = parse_native_header_fast(text, 100);
  ASSERT_TRUE(fast.has_value()) << text.substr(0, 300);
  const nlohmann::json reference = nlohmann::json::parse(text);
  ASSERT_EQ(fast->chunks.size(), reference["chunks"].size());
  EXPECT_EQ(fast->chunks[0].name, "model.w\t");
  for (size_t i = 0; i < fast->chunks.size(); ++i)
    EXPECT_EQ(fast->chunks[i].to_json(), ChunkInfo::from_json(reference["chunks"][i], "header")->to_json())
        << i;
}

TEST(NativeHeaderFastParse, LeavesEverythingElseToTheReferencePath) {
  const std::string text = header_text();
  auto replaced = [&](const std::string& from, const std::string& to) {
    return testing::replaced_once(text, from, to);
  };
  const std::vector<std::string> others = {
      text + "{}",
      header_text({{"unused", {1, 2}}}),  // a field the writer does not write
      replaced("\"format\":", "\"format\":\"x\",\"format\":"),
      replaced("\"data_bytes\":64", "\"data_bytes\":64.0"),
      replaced("\"data_bytes\":64", "\"data_bytes\":63"),  // not the bytes of its shape
      replaced("\"data_bytes\":64", "\"data_bytes\":64,\"extra\":1"),
      replaced("\"offsets\":[0,0]", "\"offsets\":[-4,0]"),
      replaced("\"ckptcheck.native-shard\"", "\"ckptcheck.other\""),
  };
  for (const std::string& other : others)
    EXPECT_FALSE(parse_native_header_fast(other, 100).has_value()) << other.substr(0, 300);
  EXPECT_FALSE(parse_native_header_fast(text, 2).has_value());  // more chunks than the file may hold
  EXPECT_TRUE(parse_native_header_fast(text, 3).has_value());
}

}  // namespace
}  // namespace ckpt
