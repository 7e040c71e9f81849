// A small but complete training state with the trainer's real names (see verifier/resumability.h)
// and consistent counters, plus the leveldb-FixChecksum-style helpers the verifier tests use to
// damage a committed checkpoint and then re-seal the hashes so the deeper checks are reached.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "base/file_io.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/safetensors_file.h"
#include "shards/checkpoint_writer.h"
#include "shards/manifest.h"
#include "tests/support/test_support.h"

namespace ckpt::testing {

constexpr int64_t kFixtureStep = 20;
constexpr int64_t kFixtureSkipped = 2;

// Finite values (patterned_tensor's random bytes would contain NaN bit patterns).
inline LoadedTensor finite_f32_tensor(const std::string& name, std::vector<int64_t> shape, float scale) {
  LoadedTensor t{name, name.substr(0, name.find('.')), DType::kF32, shape, {}};
  const int64_t n = *checked_numel(shape);
  t.bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(name.size()));
    std::memcpy(t.bytes.data() + i * 4, &v, 4);
  }
  return t;
}

inline LoadedTensor i64_scalar(const std::string& name, int64_t value) {
  LoadedTensor t{name, name.substr(0, name.find('.')), DType::kI64, {}, std::vector<uint8_t>(8)};
  std::memcpy(t.bytes.data(), &value, 8);
  return t;
}

inline LoadedTensor f64_scalar(const std::string& name, double value) {
  LoadedTensor t{name, name.substr(0, name.find('.')), DType::kF64, {}, std::vector<uint8_t>(8)};
  std::memcpy(t.bytes.data(), &value, 8);
  return t;
}

inline std::vector<LoadedTensor> full_training_state(int64_t step = kFixtureStep,
                                                     int64_t skipped = kFixtureSkipped) {
  std::vector<LoadedTensor> s;
  s.push_back(finite_f32_tensor("model.blocks.0.w", {32, 16}, 0.1f));
  s.push_back(patterned_tensor("model.mask", "model", DType::kBool, {16}));
  s.push_back(finite_f32_tensor("optimizer.model.blocks.0.w.exp_avg", {32, 16}, 0.01f));
  s.push_back(finite_f32_tensor("optimizer.model.blocks.0.w.exp_avg_sq", {32, 16}, 0.001f));
  s.push_back(i64_scalar("optimizer.model.blocks.0.w.step", step - skipped));
  s.push_back(i64_scalar("scheduler.last_step", step));
  s.push_back(f64_scalar("scheduler.base_lr", 3e-4));
  s.push_back(f64_scalar("scheduler.last_lr", 2.5e-4));
  s.push_back(f64_scalar("scaler.scale", 65536.0));
  s.push_back(f64_scalar("scaler.growth_factor", 2.0));
  s.push_back(f64_scalar("scaler.backoff_factor", 0.5));
  s.push_back(i64_scalar("scaler.growth_interval", 2000));
  s.push_back(i64_scalar("scaler.growth_tracker", 7));
  s.push_back(patterned_tensor("rng.cpu_state", "rng", DType::kU8, {5056}));
  s.push_back(i64_scalar("data.epoch", 0));
  s.push_back(i64_scalar("data.cursor", step * 8));
  s.push_back(i64_scalar("data.shuffle_seed", 1234));
  s.push_back(i64_scalar("progress.global_step", step));
  s.push_back(i64_scalar("progress.skipped_steps", skipped));
  return s;
}

inline LoadedTensor* find_state_tensor(std::vector<LoadedTensor>& state, const std::string& name) {
  for (auto& t : state) {
    if (t.name == name) return &t;
  }
  ADD_FAILURE() << "fixture has no tensor " << name;
  return nullptr;
}

inline void drop_state_tensor(std::vector<LoadedTensor>& state, const std::string& name) {
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].name == name) {
      state.erase(state.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
  ADD_FAILURE() << "fixture has no tensor " << name;
}

// Writes `state` as a committed checkpoint under `root` (3 shards; the 2 KiB tensors are split) in
// shard format `format`, its chunk records where `records` says; returns its directory.
inline std::string save_training_state(const std::string& root, const std::vector<LoadedTensor>& state,
                                       int64_t step = kFixtureStep, size_t shards = 3,
                                       const std::string& format = "native",
                                       ChunkRecords records = ChunkRecords::kInManifest) {
  std::vector<TensorView> views;
  for (const auto& t : state) views.push_back(t.view());
  CheckpointMetadata meta;
  meta.step = step;
  CheckpointWriteOptions options;
  options.num_shards = shards;
  options.split_min_bytes = 1024;
  options.format = format;
  options.chunk_records = records;
  auto committed = write_checkpoint(root, views, meta, options);
  EXPECT_TRUE(committed.is_ok()) << committed.status().to_string();
  return committed.is_ok() ? committed->dir : std::string();
}

inline Manifest read_fixture_manifest(const std::string& dir) {
  auto m = read_manifest_file(dir);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? *m : Manifest{};
}

inline void write_fixture_manifest(const std::string& dir, const Manifest& m) {
  const std::string text = manifest_to_json_text(m);
  write_file_bytes(dir + "/" + kManifestFileName, std::vector<uint8_t>(text.begin(), text.end()));
}

inline void edit_manifest(const std::string& dir, const std::function<void(Manifest&)>& edit) {
  Manifest m = read_fixture_manifest(dir);
  edit(m);
  write_fixture_manifest(dir, m);
}

// FixChecksum: after shard bytes were changed on purpose, re-records every shard's size and
// whole-file SHA-256 in the manifest, so only the deeper checks (chunk hashes, headers) can notice.
inline void refresh_shard_hashes(const std::string& dir) {
  edit_manifest(dir, [&](Manifest& m) {
    for (size_t index = 0; index < m.shards.size(); ++index) {
      auto& s = m.shards[index];
      uint64_t size = 0;
      auto sha = sha256_hex_of_file(dir + "/" + s.path, &size);
      if (s.sha256_of == "header") {
        auto source = FileByteSource::open(dir + "/" + s.path);
        ASSERT_TRUE(source.is_ok());
        if (s.format == "hdf5") {  // the metadata before the first payload (formats/README.md)
          uint64_t first = size;
          for (const auto& t : m.tensors) {
            for (const auto& c : t.chunks) {
              if (c.shard == index && c.data_bytes) first = std::min(first, c.data_offset);
            }
          }
          sha = sha256_hex_of_range(**source, 0, first);
        } else {
          sha = s.format == "safetensors" ? safetensors_header_digest(**source)
                                          : native_shard_header_digest(**source);
        }
      }
      ASSERT_TRUE(sha.is_ok()) << sha.status().to_string();
      s.sha256 = *sha;
      s.bytes = size;
    }
  });
}

// The manifest chunk `index` of `tensor`, for tests that damage one chunk's bytes.
inline ManifestChunk fixture_chunk(const std::string& dir, const std::string& tensor, size_t index) {
  const Manifest m = read_fixture_manifest(dir);
  const ManifestTensor* t = m.find_tensor(tensor);
  EXPECT_NE(t, nullptr) << tensor;
  if (!t || index >= t->chunks.size()) return {};
  return t->chunks[index];
}

inline std::string fixture_shard_path(const std::string& dir, size_t shard) {
  return dir + "/" + read_fixture_manifest(dir).shards[shard].path;
}

// The damage a fault test makes: XORs `mask` into byte `at` of the payload of chunk `index` of
// `tensor` in the checkpoint `dir`, in its shard file. Returns the damaged payload.
inline std::vector<uint8_t> flip_chunk_payload_byte(const std::string& dir, const std::string& tensor,
                                                    size_t index, uint64_t at, uint8_t mask) {
  const ManifestChunk chunk = fixture_chunk(dir, tensor, index);
  const std::string shard = fixture_shard_path(dir, chunk.shard);
  std::vector<uint8_t> bytes = read_file_bytes(shard);
  EXPECT_LT(at, chunk.data_bytes) << tensor;
  EXPECT_LE(chunk.data_offset + chunk.data_bytes, bytes.size()) << shard;
  if (at >= chunk.data_bytes || chunk.data_offset + chunk.data_bytes > bytes.size()) return {};
  bytes[chunk.data_offset + at] ^= mask;
  write_file_bytes(shard, bytes);
  return std::vector<uint8_t>(
      bytes.begin() + static_cast<std::ptrdiff_t>(chunk.data_offset),
      bytes.begin() + static_cast<std::ptrdiff_t>(chunk.data_offset + chunk.data_bytes));
}

// The same [2, 4] U8 grid (1..8) split two ways in one file, as a DCP or FSDP state is: "model.grid"
// in two column blocks (the right one first) and "model.rows" in its two rows (the second first).
// Both read back as kSplitGridBytes.
inline constexpr uint8_t kSplitGridBytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
inline std::vector<ChunkPayload> split_grid_chunks() {
  static const uint8_t left[4] = {1, 2, 5, 6}, right[4] = {3, 4, 7, 8};
  const uint8_t* grid = kSplitGridBytes;
  return {{{"model.grid", "model", DType::kU8, {2, 4}, {0, 2}, {2, 2}, 0, 4, ""}, right},
          {{"model.grid", "model", DType::kU8, {2, 4}, {0, 0}, {2, 2}, 0, 4, ""}, left},
          {{"model.rows", "model", DType::kU8, {2, 4}, {1, 0}, {1, 4}, 0, 4, ""}, grid + 4},
          {{"model.rows", "model", DType::kU8, {2, 4}, {0, 0}, {1, 4}, 0, 4, ""}, grid}};
}
inline std::vector<uint8_t> split_grid_bytes() {
  return std::vector<uint8_t>(std::begin(kSplitGridBytes), std::end(kSplitGridBytes));
}

}  // namespace ckpt::testing
