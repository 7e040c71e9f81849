#include "shards/checkpoint_writer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <map>
#include <thread>

#include "formats/native_shard.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "tests/support/test_support.h"
#include "tests/support/thread_world.h"

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

Result<CommittedCheckpoint> save(const std::string& root, const std::vector<LoadedTensor>& state,
                                 int64_t step, size_t shards) {
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
  using Extents = std::vector<int64_t>;
  scatter_chunk(Extents{3, 4}, 1, Extents{1, 1}, Extents{2, 2}, block, global.data());
  const std::vector<uint8_t> expected = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0};
  EXPECT_EQ(global, expected);
}

TEST(CheckpointWriter, TwoRanksCommitOneCheckpointWithEachRanksFileAndOwnTensors) {
  TempDir dir;
  const auto replicated = sample_state();
  // Each rank also holds what only it has: its RNG stream and its rows of an FSDP-style box.
  const LoadedTensor rng0 = patterned_tensor("rng.cpu_state.rank0", "rng", DType::kU8, {64});
  const LoadedTensor rng1 = patterned_tensor("rng.cpu_state.rank1", "rng", DType::kU8, {64});
  const LoadedTensor full = patterned_tensor("model.box", "model", DType::kF32, {8, 4});
  const size_t half = full.bytes.size() / 2;
  const std::vector<uint8_t> top(full.bytes.begin(), full.bytes.begin() + half);
  const std::vector<uint8_t> bottom(full.bytes.begin() + half, full.bytes.end());
  testing::ThreadWorld world(2);
  std::vector<Result<CommittedCheckpoint>> results(2, Status::io_error("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      testing::ThreadWorld::Rank me(world, r);
      const LoadedTensor& rng = r == 0 ? rng0 : rng1;
      const std::vector<uint8_t>& rows = r == 0 ? top : bottom;
      std::vector<RankTensor> own = {
          {rng.view(), {}, {}},
          {{"model.box", "model", DType::kF32, {4, 4}, rows.data(), rows.size()}, {r * 4, 0}, {8, 4}}};
      CheckpointMetadata meta;
      meta.step = 7;
      meta.world_size = 2;
      meta.strategy = "fsdp";
      CheckpointWriteOptions options;
      options.split_min_bytes = 1024;
      results[r] = write_checkpoint(dir.path(), views(replicated), own, meta, options, me);
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(results[0].is_ok()) << results[0].status().to_string();
  ASSERT_TRUE(results[1].is_ok()) << results[1].status().to_string();
  EXPECT_EQ(results[1]->dir, results[0]->dir);
  EXPECT_EQ(results[1]->bytes, results[0]->bytes);
  auto manifest = read_manifest_file(results[0]->dir);
  ASSERT_TRUE(manifest.is_ok()) << manifest.status().to_string();
  ASSERT_EQ(manifest->shards.size(), 2u);
  EXPECT_EQ(manifest->shards[0].rank, 0);
  EXPECT_EQ(manifest->shards[1].rank, 1);
  EXPECT_EQ(manifest->world_size, 2);
  auto loaded = load_checkpoint_tensors(results[0]->dir, *manifest);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  std::map<std::string, const LoadedTensor*> by_name;
  for (const auto& t : *loaded) by_name[t.name] = &t;
  for (const auto& t : replicated) {
    ASSERT_TRUE(by_name.count(t.name)) << t.name;
    EXPECT_EQ(by_name[t.name]->bytes, t.bytes) << t.name;
  }
  ASSERT_TRUE(by_name.count("model.box"));
  EXPECT_EQ(by_name["model.box"]->shape, full.shape);
  EXPECT_EQ(by_name["model.box"]->bytes, full.bytes);  // the two ranks' rows, reassembled
  EXPECT_EQ(by_name["rng.cpu_state.rank0"]->bytes, rng0.bytes);
  EXPECT_EQ(by_name["rng.cpu_state.rank1"]->bytes, rng1.bytes);
}

TEST(CheckpointWriter, ARankThatCannotWriteLeavesNothingCommitted) {
  TempDir dir;
  const auto replicated = sample_state();
  testing::ThreadWorld world(2);
  std::vector<Result<CommittedCheckpoint>> results(2, Status::io_error("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      testing::ThreadWorld::Rank me(world, r);
      CheckpointMetadata meta;
      meta.step = 3;
      meta.world_size = 2;
      CheckpointWriteOptions options;
      options.format = "native";
      // Rank 1 "fails" by being handed a tensor whose byte count contradicts its shape.
      std::vector<TensorView> mine = views(replicated);
      if (r == 1) mine[0].bytes -= 1;
      results[r] = write_checkpoint(dir.path(), mine, {}, meta, options, me);
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_FALSE(results[0].is_ok());
  EXPECT_FALSE(results[1].is_ok());
  EXPECT_FALSE(is_committed_checkpoint(dir / "step_00000003"));
}

// A real write failure (the file-size limit makes write(2) fail with EFBIG, as a full disk fails
// with ENOSPC): the save reports it, removes its temp dir and says so, and the checkpoint committed
// before it is untouched.
TEST(CheckpointWriter, FailedSaveRemovesItsTempDirAndKeepsEarlierCheckpoints) {
  TempDir dir;
  const auto small = sample_state();
  auto first = save(dir.path(), small, 1, 2);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  const std::vector<LoadedTensor> big = {patterned_tensor("model.big", "model", DType::kF32, {1024, 1024})};
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit limited = old;
  limited.rlim_cur = 256 * 1024;
  auto* previous = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  auto failed = save(dir.path(), big, 2, 1);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, previous);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kIoError) << failed.status().to_string();
  EXPECT_NE(failed.status().message().find("removed the partial checkpoint"), std::string::npos)
      << failed.status().to_string();
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp-", 0), std::string::npos) << entry.path();
  EXPECT_FALSE(std::filesystem::exists(dir / "step_00000002"));
  auto manifest = read_manifest_file(first->dir);
  ASSERT_TRUE(manifest.is_ok()) << manifest.status().to_string();
  EXPECT_TRUE(load_checkpoint_tensors(first->dir, *manifest).is_ok());
  auto latest = resolve_latest_checkpoint(dir.path());
  ASSERT_TRUE(latest.is_ok());
  EXPECT_EQ(*latest, first->dir);
}

}  // namespace
}  // namespace ckpt
