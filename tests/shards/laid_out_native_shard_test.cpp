// A native shard opened from the manifest's records (open_laid_out_native_shard) must be what
// parsing its header gives: the same chunks in the same order, the same metadata, the same bytes.
// And it must refuse every shard whose header is not exactly those records' layout, so that the
// format's reader opens it and says what is wrong.
#include "shards/laid_out_native_shard.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/file_io.h"
#include "formats/native_shard.h"
#include "formats/native_shard_format.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

void expect_same_chunk(const ChunkInfo& got, const ChunkInfo& want) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.component, want.component) << want.label();
  EXPECT_EQ(got.dtype, want.dtype) << want.label();
  EXPECT_EQ(got.global_shape, want.global_shape) << want.label();
  EXPECT_EQ(got.offsets, want.offsets) << want.label();
  EXPECT_EQ(got.shape, want.shape) << want.label();
  EXPECT_EQ(got.data_offset, want.data_offset) << want.label();
  EXPECT_EQ(got.data_bytes, want.data_bytes) << want.label();
  EXPECT_EQ(got.sha256, want.sha256) << want.label();
}

std::vector<uint8_t> read_whole(const TensorFile& file, size_t index) {
  std::vector<uint8_t> bytes(static_cast<size_t>(file.chunks()[index].data_bytes));
  const Status st = file.read_chunk(index, 0, bytes.data(), bytes.size());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return bytes;
}

TEST(LaidOutNativeShard, IsWhatParsingItsHeaderGives) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const Manifest manifest = read_fixture_manifest(dir);
  const auto placed = manifest_chunks_by_shard(manifest);
  ASSERT_EQ(placed.size(), manifest.shards.size());
  size_t total = 0;
  for (size_t s = 0; s < manifest.shards.size(); ++s) {
    total += placed[s].size();
    // Handed over in another order: the file's are still its header's, and index_of says where each went.
    std::vector<ManifestChunkRef> reversed(placed[s].rbegin(), placed[s].rend());
    for (const auto& given : {placed[s], reversed}) {
      auto laid_out = open_laid_out_native_shard(dir, manifest.shards[s], given);
      ASSERT_TRUE(laid_out.has_value()) << manifest.shards[s].path;
      auto parsed = open_native_shard_file(dir + "/" + manifest.shards[s].path);
      ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
      const TensorFile& file = *laid_out->file;
      EXPECT_STREQ(file.format_name(), "native");
      EXPECT_EQ(file.path(), (*parsed)->path());
      EXPECT_EQ(file.metadata(), (*parsed)->metadata());
      ASSERT_EQ(file.chunks().size(), (*parsed)->chunks().size());
      for (size_t i = 0; i < file.chunks().size(); ++i) {
        expect_same_chunk(file.chunks()[i], (*parsed)->chunks()[i]);
        EXPECT_EQ(read_whole(file, i), read_whole(**parsed, i)) << file.chunks()[i].label();
      }
      ASSERT_EQ(laid_out->index_of.size(), given.size());
      for (size_t k = 0; k < given.size(); ++k) {
        const ChunkInfo& c = file.chunks()[laid_out->index_of[k]];
        EXPECT_EQ(c.name, given[k].tensor->name);
        EXPECT_EQ(c.offsets, given[k].chunk->offsets);
        EXPECT_EQ(c.data_offset, given[k].chunk->data_offset);
      }
      EXPECT_FALSE(file.read_chunk(file.chunks().size(), 0, nullptr, 0).is_ok());
      uint8_t byte = 0;
      EXPECT_FALSE(file.read_chunk(0, file.chunks()[0].data_bytes, &byte, 1).is_ok());
    }
  }
  size_t chunks = 0;
  for (const auto& t : manifest.tensors) chunks += t.chunks.size();
  EXPECT_EQ(total, chunks);
}

TEST(LaidOutNativeShard, RefusesAnyShardItsRecordsDoNotLayOut) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  Manifest manifest = read_fixture_manifest(dir);
  const auto placed = manifest_chunks_by_shard(manifest);
  size_t s = 0;  // a shard holding at least two chunks
  while (s < placed.size() && placed[s].size() < 2) ++s;
  ASSERT_LT(s, placed.size());
  const ManifestShard& shard = manifest.shards[s];
  ASSERT_TRUE(open_laid_out_native_shard(dir, shard, placed[s]).has_value());

  auto fewer = placed[s];
  fewer.pop_back();
  EXPECT_FALSE(open_laid_out_native_shard(dir, shard, fewer).has_value()) << "a chunk fewer";
  auto twin = placed[s];
  twin.push_back(twin.back());
  EXPECT_FALSE(open_laid_out_native_shard(dir, shard, twin).has_value()) << "a chunk listed twice";

  // One field of one record other than what the header holds.
  ManifestChunk other = *placed[s][0].chunk;
  other.sha256[0] ^= 1;
  auto edited = placed[s];
  edited[0].chunk = &other;
  EXPECT_FALSE(open_laid_out_native_shard(dir, shard, edited).has_value()) << "another sha256";
  other = *placed[s][0].chunk;
  other.shape.back() -= 1;
  EXPECT_FALSE(open_laid_out_native_shard(dir, shard, edited).has_value()) << "another shape";

  ManifestShard renamed = shard;
  renamed.format = "safetensors";
  EXPECT_FALSE(open_laid_out_native_shard(dir, renamed, placed[s]).has_value()) << "another format";
  renamed = shard;
  renamed.path = "../" + shard.path;
  EXPECT_FALSE(open_laid_out_native_shard(dir, renamed, placed[s]).has_value()) << "a path outside";

  // The same records, the file damaged: one header byte, then a torn tail.
  const std::string path = dir + "/" + shard.path;
  const auto bytes = read_file_bytes(path);
  auto damaged = bytes;
  damaged[kNativePreambleBytes + 10] ^= 0x01;
  write_file_bytes(path, damaged);
  EXPECT_FALSE(open_laid_out_native_shard(dir, shard, placed[s]).has_value()) << "a header byte flipped";
  write_file_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.end() - 1));
  EXPECT_FALSE(open_laid_out_native_shard(dir, shard, placed[s]).has_value()) << "a torn tail";
  write_file_bytes(path, bytes);
  EXPECT_TRUE(open_laid_out_native_shard(dir, shard, placed[s]).has_value()) << "restored";
}

}  // namespace
}  // namespace ckpt
