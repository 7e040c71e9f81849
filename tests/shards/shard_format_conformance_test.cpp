// One conformance suite for the shard formats ckptcheck writes (native, safetensors, HDF5): each is
// written by the one save pipeline, verified, damaged (a flipped payload byte, a truncated shard, a
// missing shard) and resumed (loaded back bit for bit), through the same cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "shards/checkpoint_reader.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class ShardFormatConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    state_ = full_training_state();
    std::vector<TensorView> views;
    for (const auto& t : state_) views.push_back(t.view());
    CheckpointMetadata meta;
    meta.step = kFixtureStep;
    CheckpointWriteOptions options;
    options.num_shards = 3;
    options.split_min_bytes = 1024;
    options.format = GetParam();
    auto committed = write_checkpoint(root_.path(), views, meta, options);
    ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
    dir_ = committed->dir;
  }

  VerifyReport verify() {
    auto r = verify_path(dir_, VerifyOptions{});
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? *r : VerifyReport{};
  }

  // A byte in the middle of the largest chunk's payload, and its shard.
  std::pair<std::string, uint64_t> payload_byte() {
    const Manifest m = read_fixture_manifest(dir_);
    uint64_t best = 0;
    std::pair<std::string, uint64_t> out;
    for (const auto& t : m.tensors) {
      for (const auto& c : t.chunks) {
        if (c.data_bytes <= best) continue;
        best = c.data_bytes;
        out = {dir_ + "/" + m.shards[c.shard].path, c.data_offset + c.data_bytes / 2};
      }
    }
    return out;
  }

  TempDir root_;
  std::vector<LoadedTensor> state_;
  std::string dir_;
};

TEST_P(ShardFormatConformance, WrittenCheckpointVerifiesClean) {
  const VerifyReport r = verify();
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].message);
  EXPECT_EQ(r.kind, "ckptcheck");
  EXPECT_EQ(read_fixture_manifest(dir_).shards[0].format, GetParam());
}

TEST_P(ShardFormatConformance, FlippedPayloadByteIsNamedByChunk) {
  const auto [shard, offset] = payload_byte();
  auto bytes = read_file_bytes(shard);
  bytes[offset] ^= 0x10;
  write_file_bytes(shard, bytes);
  const VerifyReport r = verify();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.has_error(verify_code::kShardSha256Mismatch) ||
              r.has_error(verify_code::kChunkSha256Mismatch));
}

TEST_P(ShardFormatConformance, TruncatedOrMissingShardFails) {
  const auto [shard, offset] = payload_byte();
  std::filesystem::resize_file(shard, offset);
  EXPECT_TRUE(verify().has_error(verify_code::kShardSizeMismatch));
  std::filesystem::remove(shard);
  EXPECT_TRUE(verify().has_error(verify_code::kShardMissing));
}

TEST_P(ShardFormatConformance, ResumeLoadsEveryTensorBitForBit) {
  const Manifest m = read_fixture_manifest(dir_);
  auto loaded = load_checkpoint_tensors(dir_, m);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  ASSERT_EQ(loaded->size(), state_.size());
  for (const LoadedTensor& want : state_) {
    const auto it = std::find_if(loaded->begin(), loaded->end(),
                                 [&](const LoadedTensor& t) { return t.name == want.name; });
    ASSERT_NE(it, loaded->end()) << want.name;
    EXPECT_EQ(it->dtype, want.dtype) << want.name;
    EXPECT_EQ(it->shape, want.shape) << want.name;
    EXPECT_TRUE(it->bytes == want.bytes) << want.name << ": bytes differ after the round trip";
  }
  // A damaged shard is refused by the loader too, naming it, rather than resumed from.
  const auto [shard, offset] = payload_byte();
  auto bytes = read_file_bytes(shard);
  bytes[offset] ^= 0x10;
  write_file_bytes(shard, bytes);
  auto damaged = load_checkpoint_tensors(dir_, m);
  ASSERT_FALSE(damaged.is_ok());
  EXPECT_NE(damaged.status().message().find(std::filesystem::path(shard).filename().string()),
            std::string::npos)
      << damaged.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(EveryShardFormat, ShardFormatConformance,
                         ::testing::Values("native", "safetensors", "hdf5"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace ckpt
