#include "verifier/tensors/source_conversion.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "formats/safetensors_file.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

// What the committed checkpoint under `root` holds, by name.
std::vector<LoadedTensor> committed_state(const std::string& root) {
  auto dir = resolve_latest_checkpoint(root);
  EXPECT_TRUE(dir.is_ok()) << dir.status().to_string();
  if (!dir.is_ok()) return {};
  auto loaded = load_checkpoint_tensors(*dir, read_fixture_manifest(*dir));
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  if (!loaded.is_ok()) return {};
  std::sort(loaded->begin(), loaded->end(),
            [](const LoadedTensor& a, const LoadedTensor& b) { return a.name < b.name; });
  return std::move(*loaded);
}

void expect_state(const std::vector<LoadedTensor>& got, std::vector<LoadedTensor> want) {
  std::sort(want.begin(), want.end(),
            [](const LoadedTensor& a, const LoadedTensor& b) { return a.name < b.name; });
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].dtype, want[i].dtype) << want[i].name;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].name;
    EXPECT_EQ(got[i].bytes, want[i].bytes) << want[i].name;
  }
}

bool holds_nothing(const std::string& root) {
  return !std::filesystem::exists(root) || std::filesystem::is_empty(root);
}

// Every tensor of a checkpoint whose chunks are row blocks is copied from the source's files as the
// writers reach it, never held, into every format and another shard count; the copy is the state.
TEST(SourceConversion, CopiesEveryTensorInRunsFromTheSourceWithoutHoldingIt) {
  TempDir root;
  const auto state = full_training_state();
  const std::string dir = save_training_state(root / "src", state, kFixtureStep, 3);
  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  auto conversion = SourceConversion::check(*source);
  ASSERT_TRUE(conversion.is_ok()) << conversion.status().to_string();
  EXPECT_EQ(conversion->held_tensor_count(), 0u);
  for (const TensorView& v : conversion->views()) EXPECT_EQ(v.data, nullptr) << v.name;
  for (const char* format : {"native", "safetensors", "hdf5"}) {
    SCOPED_TRACE(format);
    CheckpointWriteOptions options;
    options.format = format;
    options.num_shards = 2;
    options.split_min_bytes = 256;  // other cuts than the source's
    const std::string out = root / (std::string("out-") + format);
    auto committed = conversion->write(out, {kFixtureStep}, options);
    ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
    expect_state(committed_state(out), state);
  }
}

// A tensor split in columns (as DCP and FSDP write) is copied from its boxes too, never held.
TEST(SourceConversion, CopiesATensorSplitInColumnsFromItsBoxes) {
  TempDir root;
  ASSERT_TRUE(write_safetensors_file(root / "g.safetensors", split_grid_chunks(), {}).is_ok());
  auto source = TensorSource::open(root / "g.safetensors");
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  auto conversion = SourceConversion::check(*source);
  ASSERT_TRUE(conversion.is_ok()) << conversion.status().to_string();
  EXPECT_EQ(conversion->held_tensor_count(), 0u);
  for (const TensorView& v : conversion->views()) EXPECT_EQ(v.data, nullptr) << v.name;
  CheckpointWriteOptions options;
  options.num_shards = 2;
  options.split_min_bytes = 4;  // both split by rows over both files
  ASSERT_TRUE(conversion->write(root / "out", {}, options).is_ok());
  const std::vector<uint8_t> want = split_grid_bytes();
  expect_state(committed_state(root / "out"), {{"model.grid", "model", DType::kU8, {2, 4}, want},
                                               {"model.rows", "model", DType::kU8, {2, 4}, want}});
}

// Damage is found by the check, before anything is written, with reading's own error.
TEST(SourceConversion, ADamagedSourceFailsTheCheckWithReadingsError) {
  TempDir root;
  const std::string dir = save_training_state(root / "src", full_training_state());
  ASSERT_FALSE(flip_chunk_payload_byte(dir, "model.blocks.0.w", 1, 5, 0x40).empty());
  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  auto conversion = SourceConversion::check(*source);
  ASSERT_FALSE(conversion.is_ok());
  EXPECT_EQ(conversion.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(conversion.status().to_string(), source->read_tensors().status().to_string());
}

// Checking and copying are two reads: a source file written between them (even with bytes that
// hash alike, as damage repaired would) fails the conversion before its manifest, and nothing is
// committed or left behind.
TEST(SourceConversion, ASourceFileWrittenAfterTheCheckIsNeverCommitted) {
  TempDir root;
  const std::string dir = save_training_state(root / "src", full_training_state());
  for (const bool same_bytes : {true, false}) {  // the flip last: it damages the source
    SCOPED_TRACE(same_bytes ? "the same bytes written again" : "a payload byte flipped");
    auto source = TensorSource::open(dir);
    ASSERT_TRUE(source.is_ok()) << source.status().to_string();
    auto conversion = SourceConversion::check(*source);
    ASSERT_TRUE(conversion.is_ok()) << conversion.status().to_string();
    const std::string shard = fixture_shard_path(dir, fixture_chunk(dir, "model.blocks.0.w", 1).shard);
    std::vector<uint8_t> bytes = read_file_bytes(shard);
    if (!same_bytes) bytes[bytes.size() - 1] ^= 0x01;
    std::filesystem::remove(shard);  // a new inode, as a writer replacing the file makes
    write_file_bytes(shard, bytes);
    const std::string out = root / (same_bytes ? "out-same" : "out-flipped");
    auto committed = conversion->write(out, {kFixtureStep}, {});
    ASSERT_FALSE(committed.is_ok());
    EXPECT_EQ(committed.status().code(), StatusCode::kIoError);
    EXPECT_NE(committed.status().message().find(shard + ": changed while it was copied"), std::string::npos)
        << committed.status().to_string();
    EXPECT_FALSE(resolve_latest_checkpoint(out).is_ok());
    EXPECT_TRUE(holds_nothing(out)) << out;
  }
}

}  // namespace
}  // namespace ckpt
