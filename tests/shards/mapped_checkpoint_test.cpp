#include "shards/mapped_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>

#include "formats/native_shard_format.h"
#include "shards/checkpoint_writer.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::patterned_tensor;
using testing::read_file_bytes;
using testing::TempDir;
using testing::write_file_bytes;

// Rows of 4 KiB split on page boundaries (stitched), rows of 4000 bytes (assembled: the pieces
// cannot sit side by side in pages), and small tensors that stay whole (views into one file).
std::vector<LoadedTensor> state() {
  return {patterned_tensor("model.w", "model", DType::kF32, {96, 1024}),
          patterned_tensor("model.odd", "model", DType::kF32, {64, 1000}),
          patterned_tensor("optimizer.model.w.exp_avg", "optimizer", DType::kBF16, {64, 2048}),
          patterned_tensor("model.ln.bias", "model", DType::kF32, {48}),
          patterned_tensor("progress.global_step", "progress", DType::kI64, {})};
}

Result<CommittedCheckpoint> save(const std::string& root, const std::vector<LoadedTensor>& tensors,
                                 size_t shards, const std::string& format = "native") {
  std::vector<TensorView> views;
  for (const auto& t : tensors) views.push_back(t.view());
  CheckpointMetadata meta;
  meta.step = 7;
  CheckpointWriteOptions options;
  options.num_shards = shards;
  options.format = format;
  return write_checkpoint(root, views, meta, options);
}

void expect_same(const MappedCheckpoint& mapped, const std::vector<LoadedTensor>& expected) {
  ASSERT_EQ(mapped.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorView& v = mapped.tensors()[i];
    EXPECT_EQ(v.name, expected[i].name);
    EXPECT_EQ(v.shape, expected[i].shape);
    ASSERT_EQ(v.bytes, expected[i].bytes.size()) << v.name;
    EXPECT_EQ(std::memcmp(v.data, expected[i].bytes.data(), v.bytes), 0) << v.name;
  }
}

uint64_t bytes_of(const std::vector<LoadedTensor>& tensors, const std::string& except = "") {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.name == except ? 0 : t.bytes.size();
  return n;
}

class MappedCheckpointShards : public ::testing::TestWithParam<size_t> {};

TEST_P(MappedCheckpointShards, ViewsHoldTheSavedBytesMostlyWithoutACopy) {
  TempDir dir;
  const auto tensors = state();
  auto committed = save(dir.path(), tensors, GetParam());
  ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
  for (bool verify : {true, false}) {
    LoadOptions options;
    options.verify_hashes = verify;
    auto mapped = map_checkpoint_tensors(committed->dir, committed->manifest, options);
    ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
    expect_same(*mapped, tensors);
    // One shard: everything is a whole chunk. More: only model.odd (4000-byte rows) is copied.
    EXPECT_EQ(mapped->zero_copy_bytes(),
              GetParam() == 1 ? bytes_of(tensors) : bytes_of(tensors, "model.odd"));
  }
  LoadOptions read_only;
  read_only.map_files = false;  // verify's way: pread, nothing mapped
  auto read = map_checkpoint_tensors(committed->dir, committed->manifest, read_only);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  expect_same(*read, tensors);
  EXPECT_EQ(read->zero_copy_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(OneTwoThree, MappedCheckpointShards, ::testing::Values(1, 2, 3));

TEST(MappedCheckpoint, LargePayloadsStartOnAPage) {
  TempDir dir;
  auto committed = save(dir.path(), state(), 2);
  ASSERT_TRUE(committed.is_ok());
  for (const auto& t : committed->manifest.tensors) {
    for (const auto& c : t.chunks) {
      const uint64_t alignment =
          c.data_bytes >= kPageAlignedPayloadMinBytes ? kPagePayloadAlignment : kPayloadAlignment;
      EXPECT_EQ(c.data_offset % alignment, 0u) << t.name << " @" << c.data_offset;
    }
  }
}

// Flips one payload byte of a stitched tensor in the file the tool wrote.
std::string corrupt_first_chunk_of(const CommittedCheckpoint& c, const std::string& tensor) {
  for (const auto& t : c.manifest.tensors) {
    if (t.name != tensor) continue;
    const ManifestChunk& chunk = t.chunks.front();
    const std::string path = c.dir + "/" + c.manifest.shards[chunk.shard].path;
    auto bytes = read_file_bytes(path);
    bytes[chunk.data_offset + 100] ^= 0x01;
    write_file_bytes(path, bytes);
    return c.manifest.shards[chunk.shard].path;
  }
  return "";
}

TEST(MappedCheckpoint, AFlippedPayloadByteFailsTheLoadNamingShardAndChunk) {
  TempDir dir;
  auto committed = save(dir.path(), state(), 2);
  ASSERT_TRUE(committed.is_ok());
  const std::string shard = corrupt_first_chunk_of(*committed, "model.w");
  auto mapped = map_checkpoint_tensors(committed->dir, committed->manifest);
  ASSERT_FALSE(mapped.is_ok());
  EXPECT_EQ(mapped.status().code(), StatusCode::kCorruption);
  EXPECT_NE(mapped.status().message().find(shard), std::string::npos) << mapped.status().message();
  EXPECT_NE(mapped.status().message().find("sha256 mismatch for model.w[0:48"), std::string::npos)
      << mapped.status().message();
  // What "no re-hash" means: the same load without hashing does not notice. `verify` is the check.
  LoadOptions trusted;
  trusted.verify_hashes = false;
  auto unchecked = map_checkpoint_tensors(committed->dir, committed->manifest, trusted);
  ASSERT_TRUE(unchecked.is_ok()) << unchecked.status().to_string();
  EXPECT_NE(std::memcmp(unchecked->tensors()[0].data, state()[0].bytes.data(), state()[0].bytes.size()), 0);
}

TEST(MappedCheckpoint, SelectLoadsOnlyTheChosenTensors) {
  TempDir dir;
  auto committed = save(dir.path(), state(), 2);
  ASSERT_TRUE(committed.is_ok());
  LoadOptions options;
  options.select = [](const ManifestTensor& t) { return t.component == "progress"; };
  auto mapped = map_checkpoint_tensors(committed->dir, committed->manifest, options);
  ASSERT_TRUE(mapped.is_ok());
  ASSERT_EQ(mapped->tensors().size(), 1u);
  EXPECT_EQ(mapped->tensors()[0].name, "progress.global_step");
}

TEST(MappedCheckpoint, OtherFormatsLoadTheSameBytes) {
  for (const std::string format : {"safetensors", "hdf5"}) {
    TempDir dir;
    const auto tensors = state();
    auto committed = save(dir.path(), tensors, 2, format);
    if (!committed.is_ok() && committed.status().message().find("unknown shard format") != std::string::npos)
      continue;
    ASSERT_TRUE(committed.is_ok()) << format << ": " << committed.status().to_string();
    auto mapped = map_checkpoint_tensors(committed->dir, committed->manifest);
    ASSERT_TRUE(mapped.is_ok()) << format << ": " << mapped.status().to_string();
    expect_same(*mapped, tensors);
  }
}

}  // namespace
}  // namespace ckpt
