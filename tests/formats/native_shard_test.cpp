#include "formats/native_shard.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/sha256.h"
#include "formats/native_shard_format.h"
#include "shards/sharding_plan.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::patterned_tensor;
using testing::read_file_bytes;
using testing::TempDir;

ChunkInfo whole(const LoadedTensor& t) {
  return whole_chunk(t.view());
}

class NativeShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tensors_.push_back(patterned_tensor("model.w", "model", DType::kF32, {8, 5}));
    tensors_.push_back(patterned_tensor("model.mask", "model", DType::kBool, {3, 3}));
    tensors_.push_back(patterned_tensor("progress.global_step", "progress", DType::kI64, {}));
    std::vector<ChunkPayload> payloads;
    for (const auto& t : tensors_) payloads.push_back({whole(t), t.bytes.data()});
    path_ = dir_ / "shard.cks";
    auto written = write_native_shard(path_, payloads, {{"step", 7}});
    ASSERT_TRUE(written.is_ok()) << written.status().to_string();
    written_ = *written;
    bytes_ = read_file_bytes(path_);
  }

  Result<std::unique_ptr<NativeShardFile>> open_bytes(std::vector<uint8_t> bytes) {
    return open_native_shard(std::make_unique<MemoryByteSource>(std::move(bytes), "shard.cks"));
  }

  // Rewrites the header JSON and fixes the header hash so the deeper checks are reached.
  std::vector<uint8_t> with_header(const nlohmann::json& header) { return with_header_text(header.dump()); }

  std::vector<uint8_t> with_header_text(std::string text) {
    const uint64_t old_len = written_.chunks[0].data_offset - kNativePreambleBytes;
    text.resize(std::max<size_t>(text.size(), old_len), ' ');
    std::vector<uint8_t> out(bytes_.begin(), bytes_.begin() + kNativePreambleBytes);
    for (int i = 0; i < 8; ++i)
      out[16 + i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
    Sha256 h;
    h.update(text.data(), text.size());
    auto digest = h.finish();
    std::memcpy(out.data() + 24, digest.data(), 32);
    out.insert(out.end(), text.begin(), text.end());
    out.insert(out.end(), bytes_.begin() + kNativePreambleBytes + old_len, bytes_.end());
    return out;
  }

  nlohmann::json header() {
    auto file = open_bytes(bytes_);
    std::string text(bytes_.begin() + kNativePreambleBytes, bytes_.begin() + written_.chunks[0].data_offset);
    return nlohmann::json::parse(text);
  }

  TempDir dir_;
  std::vector<LoadedTensor> tensors_;
  std::string path_;
  WrittenFile written_;
  std::vector<uint8_t> bytes_;
};

TEST_F(NativeShardTest, RoundTripsEveryChunkWithItsHash) {
  auto file = open_native_shard_file(path_);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  ASSERT_EQ((*file)->chunks().size(), tensors_.size());
  EXPECT_EQ((*file)->metadata()["step"], 7);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const ChunkInfo& c = (*file)->chunks()[i];
    EXPECT_EQ(c.name, tensors_[i].name);
    EXPECT_EQ(c.data_offset % kPayloadAlignment, 0u);
    auto bytes = read_whole_chunk(**file, i);
    ASSERT_TRUE(bytes.is_ok());
    EXPECT_EQ(*bytes, tensors_[i].bytes);
    EXPECT_EQ(*hash_chunk(**file, i), sha256_hex(tensors_[i].bytes.data(), tensors_[i].bytes.size()));
  }
  // The manifest digest of a native shard covers its preamble and header (which hold every payload's hash).
  EXPECT_EQ(written_.sha256_of, "header");
  const uint64_t header_end = written_.chunks[0].data_offset;  // payloads follow the padded header
  std::vector<uint8_t> prefix(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(header_end));
  EXPECT_EQ(written_.sha256, sha256_hex(prefix.data(), prefix.size()));
  EXPECT_EQ(*native_shard_header_digest(MemoryByteSource(bytes_)), written_.sha256);
  EXPECT_EQ(written_.bytes, bytes_.size());
}

TEST_F(NativeShardTest, HeaderTextIsWhatNlohmannDumpsOfTheSameObject) {
  // The header is written field by field (base/json_text_writer.h), not dumped from an object:
  // its text must stay the compact, key-sorted dump of the object it describes, escapes included.
  std::vector<ChunkPayload> payloads;
  LoadedTensor odd = patterned_tensor("model.\"quoted\"\\ caf\u00e9\t.w", "model", DType::kF16, {4, 3});
  for (const auto& t : tensors_) payloads.push_back({whole(t), t.bytes.data()});
  payloads.push_back({whole(odd), odd.bytes.data()});
  const std::string path = dir_ / "odd.cks";
  nlohmann::json metadata = {{"step", 7}, {"note", "\u00fcber\n"}, {"list", {1, -2, 3.5}}};
  auto written = write_native_shard(path, payloads, metadata);
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(bytes[16 + i]) << (8 * i);
  std::string text(bytes.begin() + kNativePreambleBytes, bytes.begin() + kNativePreambleBytes + length);
  text.erase(text.find_last_not_of(' ') + 1);  // the padding up to the first payload
  nlohmann::json object = {
      {"format", "ckptcheck.native-shard"}, {"metadata", metadata}, {"chunks", nlohmann::json::array()}};
  for (const ChunkInfo& c : written->chunks) object["chunks"].push_back(c.to_json());
  EXPECT_EQ(text, object.dump());
  auto file = open_native_shard_file(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ((*file)->chunks().back().name, odd.name);
}

// The comparison verify makes instead of parsing a header (native_header_metadata_if_laid_out):
// the writer's own chunks, in its order, give the header's metadata; any difference from what the
// header holds, or anything open_native_shard would refuse, gives nothing.
TEST_F(NativeShardTest, AHeaderIsTheLayoutOfExactlyTheChunksItWasWrittenFrom) {
  auto laid_out = [](const std::vector<uint8_t>& bytes, std::vector<ChunkInfo> chunks) {
    const MemoryByteSource source(bytes, "shard.cks");
    return native_header_metadata_if_laid_out(source, chunks.size(), [&](size_t i) {
      const ChunkInfo& c = chunks[i];
      return NativeChunkFields{c.name,  c.component,   c.dtype,      c.global_shape, c.offsets,
                               c.shape, c.data_offset, c.data_bytes, c.sha256};
    });
  };
  const std::vector<ChunkInfo>& written = written_.chunks;
  const auto metadata = laid_out(bytes_, written);
  ASSERT_TRUE(metadata.has_value());
  EXPECT_EQ(*metadata, nlohmann::json({{"step", 7}}));

  std::vector<std::vector<ChunkInfo>> others;
  auto changed = [&](const std::function<void(std::vector<ChunkInfo>&)>& edit) {
    std::vector<ChunkInfo> c = written;
    edit(c);
    others.push_back(c);
  };
  changed([](auto& c) { c[1].sha256[10] = c[1].sha256[10] == 'a' ? 'b' : 'a'; });
  changed([](auto& c) { c[0].name = "model.v"; });
  changed([](auto& c) { c[2].component = "other"; });
  changed([](auto& c) { std::swap(c[0], c[1]); });  // another order
  changed([](auto& c) { c.pop_back(); });           // a chunk the fields do not list
  changed([](auto& c) { c.push_back(c.back()); });  // one the header does not hold
  changed([](auto& c) { c[0].data_offset += 64; });
  changed([](auto& c) { c[0].shape[0] = 9; });  // an entry open_native_shard refuses (outside its tensor)
  for (const auto& other : others) EXPECT_FALSE(laid_out(bytes_, other).has_value());

  std::vector<uint8_t> damaged = bytes_;
  damaged[kNativePreambleBytes + 20] ^= 1;  // the header no longer hashes as its preamble says
  EXPECT_FALSE(laid_out(damaged, written).has_value());
  std::vector<uint8_t> torn(bytes_.begin(), bytes_.end() - 1);  // the last payload cut short
  EXPECT_FALSE(open_bytes(torn).is_ok());
  EXPECT_FALSE(laid_out(torn, written).has_value());
  std::vector<uint8_t> longer = bytes_;
  longer.resize(bytes_.size() + 128, 0);  // bytes after the last payload
  EXPECT_FALSE(open_bytes(longer).is_ok());
  EXPECT_FALSE(laid_out(longer, written).has_value());
}

TEST_F(NativeShardTest, NeverOverwritesAnExistingFile) {
  auto again = write_native_shard(path_, {}, {});
  EXPECT_EQ(again.status().code(), StatusCode::kIoError);
  EXPECT_EQ(read_file_bytes(path_), bytes_);
}

TEST_F(NativeShardTest, BadMagicIsCorruption) {
  auto bytes = bytes_;
  bytes[0] = 'X';
  auto file = open_bytes(bytes);
  EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
  EXPECT_NE(file.status().message().find("bad magic"), std::string::npos);
}

TEST_F(NativeShardTest, UnknownVersionIsNotSupported) {
  auto bytes = bytes_;
  bytes[8] = 9;
  EXPECT_EQ(open_bytes(bytes).status().code(), StatusCode::kNotSupported);
}

TEST_F(NativeShardTest, HugeHeaderLengthIsRejectedBeforeAllocating) {
  auto bytes = bytes_;
  ASSERT_GT(bytes.size(), 24u);
  std::fill(bytes.begin() + 16, bytes.begin() + 24, uint8_t{0xff});
  auto file = open_bytes(bytes);
  EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
  EXPECT_NE(file.status().message().find("header length"), std::string::npos);
}

TEST_F(NativeShardTest, FlippedHeaderByteFailsHeaderHash) {
  auto bytes = bytes_;
  bytes[kNativePreambleBytes + 3] ^= 0x20;
  auto file = open_bytes(bytes);
  EXPECT_NE(file.status().message().find("header sha256 mismatch"), std::string::npos);
}

TEST_F(NativeShardTest, TornTailIsTruncatedNotCorrupt) {
  auto bytes = bytes_;
  bytes.resize(bytes.size() - 10);
  auto file = open_bytes(bytes);
  EXPECT_EQ(file.status().code(), StatusCode::kTruncated);
  EXPECT_NE(file.status().message().find("torn"), std::string::npos);
}

TEST_F(NativeShardTest, TrailingGarbageIsCorruption) {
  auto bytes = bytes_;
  bytes.resize(bytes.size() + 4096, 0);
  EXPECT_EQ(open_bytes(bytes).status().code(), StatusCode::kCorruption);
}

TEST_F(NativeShardTest, WrongTypeInHeaderNamesTheField) {
  auto h = header();
  h["chunks"][0]["shape"] = "eight";
  auto file = open_bytes(with_header(h));
  EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
  EXPECT_NE(file.status().message().find("'shape'"), std::string::npos) << file.status().message();
}

TEST_F(NativeShardTest, OverlappingPayloadsAreRejected) {
  auto h = header();
  h["chunks"][1]["data_offset"] = h["chunks"][0]["data_offset"];
  auto file = open_bytes(with_header(h));
  EXPECT_NE(file.status().message().find("overlaps"), std::string::npos) << file.status().message();
}

TEST_F(NativeShardTest, ChunkOutsideGlobalShapeIsRejected) {
  auto h = header();
  h["chunks"][0]["offsets"] = {4, 0};
  auto file = open_bytes(with_header(h));
  EXPECT_NE(file.status().message().find("outside global shape"), std::string::npos)
      << file.status().message();
}

TEST_F(NativeShardTest, SizeThatDisagreesWithShapeIsRejected) {
  auto h = header();
  h["chunks"][0]["data_bytes"] = 12;
  auto file = open_bytes(with_header(h));
  EXPECT_NE(file.status().message().find("data_bytes 12"), std::string::npos) << file.status().message();
}

TEST_F(NativeShardTest, UnknownDtypeIsRejected) {
  auto h = header();
  h["chunks"][0]["dtype"] = "F8";
  EXPECT_NE(open_bytes(with_header(h)).status().message().find("unknown dtype 'F8'"), std::string::npos);
}

// The header hash is no defence against a hostile writer: it computes it. 200,000 nested arrays in
// the metadata (400 KB) are refused by the depth bound before any JSON value is built.
TEST_F(NativeShardTest, DeeplyNestedMetadataIsRefusedNotACrash) {
  std::string text = header().dump();
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const size_t at = text.find("\"metadata\":");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 200);
  text.insert(at, "\"deep\":" + deep + ",");
  auto r = open_bytes(with_header_text(text));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("nests deeper than 128"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace ckpt
