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
    dir_ = save_training_state(root_.path(), state_, kFixtureStep, 3, GetParam());
    ASSERT_FALSE(dir_.empty());
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

  // Every shard's payload ranges, sorted, with the shard's path.
  struct ShardLayout {
    std::string path;
    std::vector<std::pair<uint64_t, uint64_t>> payloads;  // [begin, end)
  };
  std::vector<ShardLayout> shard_layouts() {
    const Manifest m = read_fixture_manifest(dir_);
    std::vector<ShardLayout> out(m.shards.size());
    for (size_t i = 0; i < m.shards.size(); ++i) out[i].path = dir_ + "/" + m.shards[i].path;
    for (const auto& t : m.tensors) {
      for (const auto& c : t.chunks) {
        if (c.data_bytes) out[c.shard].payloads.push_back({c.data_offset, c.data_offset + c.data_bytes});
      }
    }
    for (auto& s : out) std::sort(s.payloads.begin(), s.payloads.end());
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

// The shard digest covers the header (HDF5: the metadata before the first payload): a flipped
// byte there fails verify, naming the shard, whatever that byte means to the format's parser.
TEST_P(ShardFormatConformance, FlippedHeaderByteFailsVerifyNamingTheShard) {
  const Manifest m = read_fixture_manifest(dir_);
  EXPECT_EQ(m.shards[0].sha256_of, "header");
  const ShardLayout shard = shard_layouts()[0];
  ASSERT_FALSE(shard.payloads.empty());
  auto bytes = read_file_bytes(shard.path);
  bytes[shard.payloads[0].first / 2] ^= 0x01;
  write_file_bytes(shard.path, bytes);
  const VerifyReport r = verify();
  EXPECT_FALSE(r.ok());
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors[0].shard, m.shards[0].path) << r.errors[0].code << ": " << r.errors[0].message;
}

// Every byte of a shard is covered: by the digest, by a payload's hash, or as padding that must be
// zero. Tensors of 1025 F32 elements leave padding after payloads in formats that align them; a
// non-zero byte there fails verify. A format that packs payloads back to back has no such byte:
// its payloads must then tile the file from the first one to the end.
TEST_P(ShardFormatConformance, EveryByteAfterTheHeaderIsAPayloadOrCheckedPadding) {
  std::vector<float> values(1025);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  std::vector<TensorView> views;
  for (int t = 0; t < 6; ++t) {
    views.push_back({"odd." + std::to_string(t),
                     "model",
                     DType::kF32,
                     {1025},
                     reinterpret_cast<const uint8_t*>(values.data()),
                     4100});
  }
  CheckpointMetadata meta;
  meta.step = kFixtureStep + 1;
  CheckpointWriteOptions options;
  options.num_shards = 2;
  options.format = GetParam();
  auto committed = write_checkpoint(root_.path(), views, meta, options);
  ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
  dir_ = committed->dir;
  bool damaged = false;
  for (const ShardLayout& shard : shard_layouts()) {
    const uint64_t size = std::filesystem::file_size(shard.path);
    ASSERT_FALSE(shard.payloads.empty());
    for (size_t i = 0; i < shard.payloads.size() && !damaged; ++i) {
      const uint64_t end = shard.payloads[i].second;
      const uint64_t next = i + 1 < shard.payloads.size() ? shard.payloads[i + 1].first : size;
      ASSERT_LE(end, next) << shard.path << ": payloads overlap";
      if (next == end) continue;
      auto bytes = read_file_bytes(shard.path);
      ASSERT_EQ(bytes[end], 0) << shard.path << " @" << end;
      bytes[end] = 0x5a;
      write_file_bytes(shard.path, bytes);
      damaged = true;
    }
  }
  if (!damaged) {
    SUCCEED() << GetParam() << " packs payloads back to back: no padding to damage";
    return;
  }
  const VerifyReport r = verify();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.has_error(verify_code::kShardSha256Mismatch));
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

// A load opens an HDF5 or native shard from the manifest's chunk table when the shard's metadata
// (HDF5: the prefix before its first payload; native: preamble and header) hashes to the manifest
// digest: no libhdf5 child, no second parse of 20,000 chunks of header (issue 44), and an empty
// metadata() shows it. When it does not, the format's reader opens the file: HDF5 then reads its
// own metadata attribute; a native shard whose header no longer matches its preamble is refused.
class ShardLoadFromManifest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardLoadFromManifest, OpensFromTheManifestOnlyWhenTheHeaderMatchesItsDigest) {
  TempDir root;
  const std::string dir =
      save_training_state(root.path(), full_training_state(), kFixtureStep, 2, GetParam());
  ASSERT_FALSE(dir.empty());
  const Manifest m = read_fixture_manifest(dir);
  auto matching = open_manifest_shard(dir, m, 0, ShardOpening::kForLoad);
  ASSERT_TRUE(matching.is_ok()) << matching.status().to_string();
  EXPECT_TRUE((*matching)->metadata().empty());
  auto parsed = open_manifest_shard(dir, m, 0);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ((*parsed)->metadata()["step"], kFixtureStep);
  // The same chunk table either way: the manifest's was recorded from the file's layout.
  ASSERT_EQ((*matching)->chunks().size(), (*parsed)->chunks().size());
  for (const ChunkInfo& c : (*parsed)->chunks()) {
    size_t i = 0;
    const auto& fast = (*matching)->chunks();
    while (i < fast.size() && fast[i].label() != c.label()) ++i;
    ASSERT_LT(i, fast.size()) << c.label();
    EXPECT_EQ(fast[i].data_offset, c.data_offset) << c.label();
    EXPECT_EQ(fast[i].data_bytes, c.data_bytes) << c.label();
    EXPECT_EQ(fast[i].sha256, c.sha256) << c.label();
  }
  if (GetParam() == "native") {
    // A load of some tensors lists only theirs (verify's resume scalars: a few of 20,000).
    const std::string one = (*parsed)->chunks().front().name;
    const TensorSelect only_one = [&](const ManifestTensor& t) { return t.name == one; };
    auto selected = open_manifest_shard(dir, m, 0, ShardOpening::kForLoad, only_one);
    ASSERT_TRUE(selected.is_ok()) << selected.status().to_string();
    ASSERT_FALSE((*selected)->chunks().empty());
    EXPECT_LT((*selected)->chunks().size(), (*parsed)->chunks().size());
    for (const ChunkInfo& c : (*selected)->chunks()) EXPECT_EQ(c.name, one) << c.label();
  }
  // A manifest (one without a digest of its own could say anything) whose chunk's byte count is
  // not its shape's is not trusted to describe the file: the file's own reader opens it.
  Manifest edited = m;
  for (ManifestTensor& t : edited.tensors) {
    if (!t.chunks.empty() && t.chunks[0].shard == 0 && t.chunks[0].data_bytes > 0) {
      t.chunks[0].data_bytes -= dtype_size(t.dtype);
      break;
    }
  }
  auto refused = open_manifest_shard(dir, edited, 0, ShardOpening::kForLoad);
  ASSERT_TRUE(refused.is_ok()) << refused.status().to_string();
  EXPECT_EQ((*refused)->metadata()["step"], kFixtureStep);
  // One byte of the metadata changed (the last before the first payload): the file's own reader
  // opens the shard again.
  const std::string shard = dir + "/" + m.shards[0].path;
  auto bytes = read_file_bytes(shard);
  uint64_t first = bytes.size();
  for (const ChunkInfo& c : (*parsed)->chunks()) {
    if (c.data_bytes) first = std::min(first, c.data_offset);
  }
  bytes[first - 1] ^= 0x01;
  write_file_bytes(shard, bytes);
  auto fallback = open_manifest_shard(dir, m, 0, ShardOpening::kForLoad);
  if (GetParam() == "native") {
    ASSERT_FALSE(fallback.is_ok());
    EXPECT_EQ(fallback.status().code(), StatusCode::kCorruption) << fallback.status().to_string();
  } else {
    ASSERT_TRUE(fallback.is_ok()) << fallback.status().to_string();
    EXPECT_EQ((*fallback)->metadata()["step"], kFixtureStep);
  }
}

INSTANTIATE_TEST_SUITE_P(HeaderDigestFormats, ShardLoadFromManifest,
                         ::testing::Values("native"
#ifdef CKPTCHECK_WITH_HDF5
                                           ,
                                           "hdf5"
#endif
                                           ),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(EveryShardFormat, ShardFormatConformance,
                         ::testing::Values("native", "safetensors", "hdf5"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace ckpt
