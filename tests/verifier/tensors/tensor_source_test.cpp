#include "verifier/tensors/tensor_source.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/file_io.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/safetensors_file.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

void expect_same_state(const TensorSource& source, const std::vector<LoadedTensor>& state) {
  ASSERT_EQ(source.tensors().size(), state.size());
  for (const auto& want : state) {
    const SourceTensor* t = source.find(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->component, want.component) << want.name;
    auto got = source.read_tensor(*t);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(got->dtype, want.dtype) << want.name;
    EXPECT_EQ(got->shape, want.shape) << want.name;
    EXPECT_EQ(got->bytes, want.bytes) << want.name;
  }
}

TEST(TensorSource, CheckpointDirAssemblesChunksSpreadOverShards) {
  TempDir root;
  const auto state = full_training_state();
  const std::string dir = save_training_state(root.path(), state);
  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  EXPECT_STREQ(source->kind(), "checkpoint");
  ASSERT_NE(source->manifest(), nullptr);
  EXPECT_EQ(source->metadata()["step"], kFixtureStep);
  EXPECT_EQ(source->files().size(), 3u);
  EXPECT_GT(source->find("model.blocks.0.w")->chunks.size(), 1u);  // 2 KiB, split at 1 KiB
  expect_same_state(*source, state);
}

TEST(TensorSource, RootResolvesToLatestCheckpoint) {
  TempDir root;
  save_training_state(root.path(), full_training_state(10, 0), 10);
  const std::string latest = save_training_state(root.path(), full_training_state(), kFixtureStep);
  auto source = TensorSource::open(root.path());
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  EXPECT_EQ(source->path(), latest);
}

TEST(TensorSource, SingleFileWithTwoChunksOfOneTensor) {
  TempDir dir;
  const float values[6] = {1, 2, 3, 4, 5, 6};  // global [3, 2], written as rows 0..1 and row 2
  const auto* bytes = reinterpret_cast<const uint8_t*>(values);
  std::vector<ChunkPayload> chunks = {
      {{"model.w", "model", DType::kF32, {3, 2}, {2, 0}, {1, 2}, 0, 8, ""}, bytes + 16},
      {{"model.w", "model", DType::kF32, {3, 2}, {0, 0}, {2, 2}, 0, 16, ""}, bytes}};
  ASSERT_TRUE(write_safetensors_file(dir / "w.safetensors", chunks, {{"step", 3}}).is_ok());
  auto source = TensorSource::open(dir / "w.safetensors");
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  EXPECT_STREQ(source->kind(), "safetensors");
  ASSERT_EQ(source->tensors().size(), 1u);
  auto t = source->read_tensor(source->tensors()[0]);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->bytes, std::vector<uint8_t>(bytes, bytes + 24));
}

TEST(TensorSource, ChunksThatDoNotCoverTheTensorAreCorruption) {
  TempDir dir;
  const float values[4] = {1, 2, 3, 4};
  std::vector<ChunkPayload> chunks = {{{"model.w", "model", DType::kF32, {3, 2}, {0, 0}, {2, 2}, 0, 16, ""},
                                       reinterpret_cast<const uint8_t*>(values)}};
  ASSERT_TRUE(write_safetensors_file(dir / "w.safetensors", chunks, {}).is_ok());
  auto source = TensorSource::open(dir / "w.safetensors");
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  auto t = source->read_tensor(source->tensors()[0]);
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("16 bytes"), std::string::npos) << t.status().to_string();
}

TEST(TensorSource, HuggingFaceIndexSpansItsShardFiles) {
  TempDir dir;
  const float a[2] = {0.5f, -1};
  const uint8_t c[3] = {7, 8, 9};
  ASSERT_TRUE(
      write_safetensors_file(
          dir / "m-1.safetensors",
          {{{"a", "model", DType::kF32, {2}, {0}, {2}, 0, 8, ""}, reinterpret_cast<const uint8_t*>(a)}}, {})
          .is_ok());
  ASSERT_TRUE(write_safetensors_file(dir / "m-2.safetensors",
                                     {{{"c", "model", DType::kU8, {3}, {0}, {3}, 0, 3, ""}, c}}, {})
                  .is_ok());
  nlohmann::json index = {{"metadata", {{"total_size", 11}}},
                          {"weight_map", {{"a", "m-1.safetensors"}, {"c", "m-2.safetensors"}}}};
  ASSERT_TRUE(write_file_atomically(dir / "model.safetensors.index.json", index.dump()).is_ok());
  auto source = TensorSource::open(dir / "model.safetensors.index.json");
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  EXPECT_STREQ(source->kind(), "safetensors_index");
  EXPECT_EQ(source->files().size(), 2u);
  auto tc = source->read_tensor(*source->find("c"));
  ASSERT_TRUE(tc.is_ok()) << tc.status().to_string();
  EXPECT_EQ(tc->bytes, (std::vector<uint8_t>{7, 8, 9}));
  EXPECT_EQ(source->metadata()["metadata"]["total_size"], 11);
}

TEST(TensorSource, FlippedPayloadByteNamesChunkAndBothHashes) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const ManifestChunk chunk = fixture_chunk(dir, "model.blocks.0.w", 1);
  const auto payload = flip_chunk_payload_byte(dir, "model.blocks.0.w", 1, 5, 0x40);
  const std::string damaged = sha256_hex(payload.data(), payload.size());

  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  const SourceTensor& t = *source->find("model.blocks.0.w");
  auto check = source->stream_chunk(t, 1, {});
  ASSERT_TRUE(check.is_ok()) << check.status().to_string();
  EXPECT_FALSE(check->ok());
  EXPECT_EQ(check->stored, digest_hex(chunk.sha256));
  EXPECT_EQ(check->computed, damaged);
  EXPECT_TRUE(source->stream_chunk(t, 0, {})->ok());

  auto read = source->read_tensor(t);
  ASSERT_FALSE(read.is_ok());
  EXPECT_EQ(read.status().code(), StatusCode::kCorruption);
  const std::string& m = read.status().message();
  EXPECT_NE(m.find(check->label), std::string::npos) << m;
  EXPECT_NE(m.find(digest_hex(chunk.sha256)), std::string::npos) << m;
  EXPECT_NE(m.find(damaged), std::string::npos) << m;
}

// read_tensors reads the files it can front to back, copying each chunk that is one run of its
// tensor into place as it hashes it, and everything else chunk by chunk: the tensors must be what
// read_tensor gives one by one, and a damaged chunk the same error.
TEST(TensorSource, ReadingEveryTensorAtOnceGivesWhatReadingEachGives) {
  TempDir root;
  const auto state = full_training_state();
  const std::string dir = save_training_state(root.path(), state);
  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  auto all = source->read_tensors();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), source->tensors().size());
  for (size_t i = 0; i < all->size(); ++i) {
    const LoadedTensor& got = (*all)[i];
    auto one = source->read_tensor(source->tensors()[i]);
    ASSERT_TRUE(one.is_ok()) << one.status().to_string();
    EXPECT_EQ(got.name, one->name);
    EXPECT_EQ(got.shape, one->shape) << got.name;
    EXPECT_EQ(got.bytes, one->bytes) << got.name;
  }
  expect_same_state(*source, state);

  // Column blocks are not runs of their tensor: scattered, in one file with a row block.
  TempDir files;
  ASSERT_TRUE(write_safetensors_file(files / "g.safetensors", split_grid_chunks(), {}).is_ok());
  auto mixed = TensorSource::open(files / "g.safetensors");
  ASSERT_TRUE(mixed.is_ok()) << mixed.status().to_string();
  auto read = mixed->read_tensors();
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  ASSERT_EQ(read->size(), 2u);
  for (const LoadedTensor& t : *read) EXPECT_EQ(t.bytes, split_grid_bytes()) << t.name;

  ASSERT_FALSE(flip_chunk_payload_byte(dir, "model.blocks.0.w", 1, 5, 0x40).empty());
  auto damaged = TensorSource::open(dir);
  ASSERT_TRUE(damaged.is_ok()) << damaged.status().to_string();
  auto whole = damaged->read_tensors();
  ASSERT_FALSE(whole.is_ok());
  EXPECT_EQ(whole.status().message(),
            damaged->read_tensor(*damaged->find("model.blocks.0.w")).status().message());
}

// Every byte range of `t` read in place equals that range of `whole` (what read_tensor gives):
// ranges from and to 0, 1, a third, a half, the last byte and the end.
void expect_every_range_reads_as(const TensorSource& source, const SourceTensor& t,
                                 const std::vector<uint8_t>& whole) {
  ASSERT_TRUE(source.reads_in_place(t)) << t.name;
  ASSERT_EQ(whole.size(), t.bytes) << t.name;
  const std::vector<uint64_t> cuts = {0,      1, t.bytes / 3, t.bytes / 2, t.bytes - (t.bytes > 0 ? 1 : 0),
                                      t.bytes};
  for (uint64_t begin : cuts) {
    for (uint64_t end : cuts) {
      if (begin >= end) continue;
      std::vector<uint8_t> got(static_cast<size_t>(end - begin), 0xEE);
      const Status read = source.read_tensor_bytes(t, begin, got.data(), got.size());
      ASSERT_TRUE(read.is_ok()) << t.name << ": " << read.to_string();
      EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.begin() + static_cast<std::ptrdiff_t>(begin)))
          << t.name << " [" << begin << ", " << end << ")";
    }
  }
}

// Any range of a tensor's bytes is read from its chunks in place as read_tensor assembles it whole,
// whether they are runs of it (dim-0 splits) or boxes (column splits, of a matrix and of a 3-D
// tensor), in whatever order they lie.
TEST(TensorSource, AnyRangeOfATensorIsReadFromItsChunksInPlace) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  size_t split = 0;
  for (const SourceTensor& t : source->tensors()) {
    auto whole = source->read_tensor(t);
    ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
    if (t.chunks.size() > 1) ++split;
    expect_every_range_reads_as(*source, t, whole->bytes);
  }
  EXPECT_GT(split, 0u);  // model.blocks.0.w: 2 KiB split at 1 KiB
  const SourceTensor& w = *source->find("model.blocks.0.w");
  uint8_t byte = 0;
  EXPECT_EQ(source->read_tensor_bytes(w, w.bytes, &byte, 1).code(), StatusCode::kInvalidArgument);

  TempDir files;
  std::vector<uint8_t> cube(24);  // [2, 3, 4] U8 holding 0..23, split at column 1 of its last dim
  for (size_t i = 0; i < cube.size(); ++i) cube[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> cube_first, cube_rest;  // columns 0 and 1-3 of every row
  for (size_t row = 0; row < 6; ++row) {
    cube_first.push_back(cube[row * 4]);
    cube_rest.insert(cube_rest.end(), cube.begin() + static_cast<std::ptrdiff_t>(row * 4 + 1),
                     cube.begin() + static_cast<std::ptrdiff_t>(row * 4 + 4));
  }
  std::vector<ChunkPayload> chunks = split_grid_chunks();
  chunks.push_back(
      {{"model.cube", "model", DType::kU8, {2, 3, 4}, {0, 0, 1}, {2, 3, 3}, 0, 18, ""}, cube_rest.data()});
  chunks.push_back(
      {{"model.cube", "model", DType::kU8, {2, 3, 4}, {0, 0, 0}, {2, 3, 1}, 0, 6, ""}, cube_first.data()});
  ASSERT_TRUE(write_safetensors_file(files / "g.safetensors", chunks, {}).is_ok());
  auto mixed = TensorSource::open(files / "g.safetensors");
  ASSERT_TRUE(mixed.is_ok()) << mixed.status().to_string();
  expect_every_range_reads_as(*mixed, *mixed->find("model.grid"), split_grid_bytes());
  expect_every_range_reads_as(*mixed, *mixed->find("model.rows"), split_grid_bytes());
  expect_every_range_reads_as(*mixed, *mixed->find("model.cube"), cube);

  // Where no chunk lies, zeros, as read_tensor's buffer holds before coverage is checked.
  ASSERT_TRUE(
      write_safetensors_file(
          files / "gap.safetensors",
          {{{"model.rows", "model", DType::kU8, {3, 4}, {0, 0}, {1, 4}, 0, 4, ""}, kSplitGridBytes},
           {{"model.rows", "model", DType::kU8, {3, 4}, {2, 0}, {1, 4}, 0, 4, ""}, kSplitGridBytes + 4}},
          {})
          .is_ok());
  auto gap = TensorSource::open(files / "gap.safetensors");
  ASSERT_TRUE(gap.is_ok()) << gap.status().to_string();
  expect_every_range_reads_as(*gap, gap->tensors()[0], {1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8});
}

// check_tensors checks what read_tensors checks and keeps each chunk's digest, whether the scan read
// its file (a committed checkpoint) or each chunk was read on its own (a torch.save file).
TEST(TensorSource, CheckingEveryTensorGivesEachChunksDigestAndReadingsFirstFailure) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const std::string torch_file = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/adamw_state.pt";
  for (const std::string& path : {dir, torch_file}) {
    SCOPED_TRACE(path);
    auto source = TensorSource::open(path);
    ASSERT_TRUE(source.is_ok()) << source.status().to_string();
    auto digests = source->check_tensors();
    ASSERT_TRUE(digests.is_ok()) << digests.status().to_string();
    ASSERT_EQ(digests->size(), source->files().size());
    size_t chunks = 0;
    for (const SourceTensor& t : source->tensors()) {
      for (size_t c = 0; c < t.chunks.size(); ++c, ++chunks) {
        const SourceChunk& sc = t.chunks[c];
        ASSERT_TRUE((*digests)[sc.file].has_value()) << t.name;
        auto hashed = source->hash_chunk(t, c, {});
        ASSERT_TRUE(hashed.is_ok()) << hashed.status().to_string();
        EXPECT_EQ((*(*digests)[sc.file])[sc.index], *hashed) << t.name << " chunk " << c;
      }
    }
    EXPECT_GT(chunks, 3u);
  }
  ASSERT_FALSE(flip_chunk_payload_byte(dir, "optimizer.model.blocks.0.w.exp_avg_sq", 2, 1, 0x08).empty());
  auto damaged = TensorSource::open(dir);
  ASSERT_TRUE(damaged.is_ok()) << damaged.status().to_string();
  auto checked = damaged->check_tensors();
  ASSERT_FALSE(checked.is_ok());
  EXPECT_EQ(checked.status().to_string(), damaged->read_tensors().status().to_string());
}

// Each chunk's place, whether its shard was opened from the manifest's records (its header is
// their layout) or by parsing its header (it is not: one record edited), is where the header puts it.
TEST(TensorSource, EveryChunkIsWhereItsShardHeaderPutsIt) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const ManifestChunk chunk = fixture_chunk(dir, "model.blocks.0.w", 1);
  for (const bool edited : {false, true}) {
    const std::string recorded = std::string(64, 'e');
    if (edited) {
      edit_manifest(dir, [&](Manifest& m) {
        for (auto& t : m.tensors) {
          if (t.name == "model.blocks.0.w") t.chunks[1].sha256 = *digest_from_hex(recorded);
        }
      });
    }
    auto source = TensorSource::open(dir);
    ASSERT_TRUE(source.is_ok()) << source.status().to_string();
    for (const SourceTensor& t : source->tensors()) {
      for (const SourceChunk& sc : t.chunks) {
        auto header = open_native_shard_file(source->files()[sc.file]->path());
        ASSERT_TRUE(header.is_ok()) << header.status().to_string();
        const ChunkInfo& want = (*header)->chunks()[sc.index];
        const ChunkPlace got = source->place(sc);
        EXPECT_EQ(want.name, t.name);
        EXPECT_EQ(got.offsets, want.offsets) << want.label();
        EXPECT_EQ(got.shape, want.shape) << want.label();
        EXPECT_EQ(got.data_offset, want.data_offset) << want.label();
        EXPECT_EQ(got.data_bytes, want.data_bytes) << want.label();
        EXPECT_EQ(got.header_sha256.hex(), want.sha256) << want.label();
      }
    }
    const SourceTensor& t = *source->find("model.blocks.0.w");
    auto check = source->stream_chunk(t, 1, {});
    ASSERT_TRUE(check.is_ok()) << check.status().to_string();
    EXPECT_EQ(check->computed, digest_hex(chunk.sha256));
    EXPECT_EQ(check->ok(), !edited);
    EXPECT_EQ(check->stored, edited ? recorded : digest_hex(chunk.sha256));
    EXPECT_EQ(source->read_tensor(t).is_ok(), !edited);
  }
}

TEST(TensorSource, MissingPathIsNotDamage) {
  TempDir root;
  auto source = TensorSource::open(root / "nope");
  ASSERT_FALSE(source.is_ok());
  EXPECT_FALSE(is_damage(source.status())) << source.status().to_string();
  EXPECT_TRUE(is_damage(Status::truncated("x")));
}

}  // namespace
}  // namespace ckpt
