#include "shards/mapped_checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "base/mapped_file.h"
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

// Another process truncating a shard in place while this one has it mapped.
void shrink_shard(const std::string& path, uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  ::close(fd);
}

// The load maps the shard while it resolves the first tensor; `select` runs before each tensor, so
// truncating from it on the last tensor shrinks the file after it is mapped and before any payload
// is hashed, copied or paged in, which is when another process would do the most harm.
TEST(MappedCheckpoint, AShardShrunkWhileMappedFailsTheLoadNamingIt) {
  TempDir dir;
  auto committed = save(dir.path(), state(), 1);
  ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
  const std::string shard = committed->dir + "/" + committed->manifest.shards[0].path;
  const uint64_t page = MappedFile::page_size();
  for (bool verify : {true, false}) {
    auto copy = dir / ("copy" + std::to_string(verify));
    auto again = save(copy, state(), 1);
    ASSERT_TRUE(again.is_ok());
    const std::string path = again->dir + "/" + again->manifest.shards[0].path;
    LoadOptions options;
    options.verify_hashes = verify;
    options.select = [&](const ManifestTensor& t) {
      if (t.name == again->manifest.tensors.back().name) shrink_shard(path, page);
      return true;
    };
    auto mapped = map_checkpoint_tensors(again->dir, again->manifest, options);
    ASSERT_FALSE(mapped.is_ok()) << "verify=" << verify;
    EXPECT_EQ(mapped.status().code(), StatusCode::kIoError) << mapped.status().to_string();
    EXPECT_NE(mapped.status().message().find(path + ": shrank while mapped (SIGBUS at offset "),
              std::string::npos)
        << mapped.status().to_string();
  }
  // Untouched, the same checkpoint loads: the truncation, not the guard, failed the loads above.
  auto intact = map_checkpoint_tensors(committed->dir, committed->manifest);
  ASSERT_TRUE(intact.is_ok()) << intact.status().to_string();
  expect_same(*intact, state());
}

// What `train --resume` does with the views (a copy into its own tensors), torch-free: guarded, a
// shard shrunk after the load is an error naming the file and the offset in it, not a SIGBUS.
TEST(MappedCheckpoint, CopyingViewsOfAShardShrunkAfterTheLoadNamesTheFile) {
  TempDir dir;
  const auto tensors = state();
  auto committed = save(dir.path(), tensors, 2);
  ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
  auto mapped = map_checkpoint_tensors(committed->dir, committed->manifest);
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  ASSERT_GT(mapped->zero_copy_bytes(), 0u);
  // model.w is stitched from both shards' page-aligned row blocks; cut the file of its rows 0.. right
  // where they start.
  const ManifestChunk* rows0 = nullptr;
  for (const auto& t : committed->manifest.tensors) {
    for (const auto& c : t.chunks) {
      if (t.name == "model.w" && c.offsets[0] == 0) rows0 = &c;
    }
  }
  ASSERT_NE(rows0, nullptr);
  const std::string path = committed->dir + "/" + committed->manifest.shards[rows0->shard].path;
  shrink_shard(path, rows0->data_offset);
  for (const TensorView& v : mapped->tensors()) {
    std::vector<uint8_t> copy(v.bytes);
    const Status s = guarded_copy(copy.data(), v.data, v.bytes, v.name);
    if (v.name != "model.w") continue;
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_EQ(s.message(),
              path + ": shrank while mapped (SIGBUS at offset " + std::to_string(rows0->data_offset) + ")");
    return;
  }
  FAIL() << "no view named model.w";
}

}  // namespace
}  // namespace ckpt
