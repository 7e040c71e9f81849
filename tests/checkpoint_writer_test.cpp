#include "shards/checkpoint_writer.h"

#include <gtest/gtest.h>

#include "formats/native_shard.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "tests/test_support.h"

namespace ckpt {
namespace {

using testing::patterned_tensor;
using testing::TempDir;

std::vector<LoadedTensor> sample_state() {
  return {patterned_tensor("model.emb", "model", DType::kF32, {64, 48}),
          patterned_tensor("model.ln.bias", "model", DType::kF32, {48}),
          patterned_tensor("optimizer.model.emb.exp_avg", "optimizer", DType::kBF16, {64, 48}),
          patterned_tensor("rng.cpu_state", "rng", DType::kU8, {5056}),
          patterned_tensor("progress.global_step", "progress", DType::kI64, {})};
}

std::vector<TensorView> views(const std::vector<LoadedTensor>& tensors) {
  std::vector<TensorView> out;
  for (const auto& t : tensors) out.push_back(t.view());
  return out;
}

Result<CommittedCheckpoint> save(const std::string& root, const std::vector<LoadedTensor>& state, int64_t step,
                                 size_t shards) {
  CheckpointMetadata meta;
  meta.step = step;
  CheckpointWriteOptions options;
  options.num_shards = shards;
  options.split_min_bytes = 1024;
  return write_checkpoint(root, views(state), meta, options);
}

class CheckpointWriterTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CheckpointWriterTest, RoundTripsBitForBitAtEveryShardCount) {
  TempDir dir;
  const auto state = sample_state();
  auto committed = save(dir.path(), state, 12, GetParam());
  ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
  EXPECT_EQ(committed->dir, dir / "step_00000012");
  EXPECT_EQ(committed->manifest.shards.size(), GetParam());
  auto manifest = read_manifest_file(committed->dir);
  ASSERT_TRUE(manifest.is_ok()) << manifest.status().to_string();
  auto loaded = load_checkpoint_tensors(committed->dir, *manifest);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  ASSERT_EQ(loaded->size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ((*loaded)[i].name, state[i].name);
    EXPECT_EQ((*loaded)[i].shape, state[i].shape);
    EXPECT_EQ((*loaded)[i].bytes, state[i].bytes) << state[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(ShardCounts, CheckpointWriterTest, ::testing::Values(1, 2, 3, 7));

TEST(CheckpointWriter, LargeTensorsAreSplitAlongDimZeroAcrossShards) {
  TempDir dir;
  auto committed = save(dir.path(), sample_state(), 1, 4);
  ASSERT_TRUE(committed.is_ok());
  const ManifestTensor* emb = committed->manifest.find_tensor("model.emb");
  ASSERT_NE(emb, nullptr);
  ASSERT_EQ(emb->chunks.size(), 4u);
  int64_t next_row = 0;
  for (const auto& c : emb->chunks) {
    EXPECT_EQ(c.offsets[0], next_row);
    EXPECT_EQ(c.shape[1], 48);
    next_row += c.shape[0];
  }
  EXPECT_EQ(next_row, 64);
}

TEST(CheckpointWriter, EachShardLoadsAloneAndMatchesTheState) {
  TempDir dir;
  const auto state = sample_state();
  auto committed = save(dir.path(), state, 3, 3);
  ASSERT_TRUE(committed.is_ok());
  for (const auto& shard : committed->manifest.shards) {
    // Opened by path alone: no manifest, no other shard.
    auto file = open_native_shard_file(committed->dir + "/" + shard.path);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    for (size_t i = 0; i < (*file)->chunks().size(); ++i) {
      const ChunkInfo& c = (*file)->chunks()[i];
      const LoadedTensor* original = nullptr;
      for (const auto& t : state) {
        if (t.name == c.name) original = &t;
      }
      ASSERT_NE(original, nullptr);
      auto bytes = read_whole_chunk(**file, i);
      ASSERT_TRUE(bytes.is_ok());
      const size_t row_bytes = c.global_shape.empty() || c.global_shape[0] == 0
                                   ? original->bytes.size()
                                   : original->bytes.size() / static_cast<size_t>(c.global_shape[0]);
      const size_t begin = c.offsets.empty() ? 0 : static_cast<size_t>(c.offsets[0]) * row_bytes;
      EXPECT_TRUE(std::equal(bytes->begin(), bytes->end(), original->bytes.begin() + begin)) << c.label();
    }
  }
}

TEST(CheckpointWriter, RefusesToOverwriteACommittedStep) {
  TempDir dir;
  ASSERT_TRUE(save(dir.path(), sample_state(), 5, 2).is_ok());
  auto again = save(dir.path(), sample_state(), 5, 2);
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("refusing to overwrite"), std::string::npos);
}

TEST(CheckpointWriter, ChunkHashMismatchIsReportedWithShardAndTensor) {
  TempDir dir;
  auto committed = save(dir.path(), sample_state(), 2, 2);
  ASSERT_TRUE(committed.is_ok());
  const ManifestTensor* emb = committed->manifest.find_tensor("model.emb");
  const auto& chunk = emb->chunks[1];
  const std::string shard_path = committed->dir + "/" + committed->manifest.shards[chunk.shard].path;
  auto bytes = testing::read_file_bytes(shard_path);
  bytes[chunk.data_offset + 5] ^= 1;
  testing::write_file_bytes(shard_path, bytes);
  auto loaded = load_checkpoint_tensors(committed->dir, committed->manifest);
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.status().message().find("sha256 mismatch for model.emb[32:64, 0:48]"), std::string::npos)
      << loaded.status().message();
}

TEST(CheckpointReader, ScatterPlacesAnInnerBlock) {
  // A 2x2 block at (1,1) of a 3x4 int8 tensor.
  std::vector<uint8_t> global(12, 0);
  const uint8_t block[4] = {1, 2, 3, 4};
  scatter_chunk({3, 4}, 1, {1, 1}, {2, 2}, block, global.data());
  const std::vector<uint8_t> expected = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0};
  EXPECT_EQ(global, expected);
}

}  // namespace
}  // namespace ckpt
