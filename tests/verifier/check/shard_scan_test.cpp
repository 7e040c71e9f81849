#include "verifier/check/shard_scan.h"

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "formats/native_shard.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class ShardScanTest : public ::testing::TestWithParam<size_t> {};

// Whatever the block size (smaller than a chunk, not a multiple of the alignment, larger than
// the file), the one pass must agree with hashing the file and each chunk separately.
TEST_P(ShardScanTest, OnePassAgreesWithSeparateHashes) {
  TempDir root;
  auto state = full_training_state();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(find_state_tensor(state, "model.blocks.0.w")->bytes.data() + 8, &nan, 4);
  const std::string dir = save_training_state(root.path(), state, kFixtureStep, 1);
  const std::string path = fixture_shard_path(dir, 0);
  auto file = open_native_shard_file(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  std::atomic<uint64_t> done{0};
  auto scan = scan_shard(path, **file, &done, GetParam());
  ASSERT_TRUE(scan.is_ok()) << scan.status().to_string();
  uint64_t size = 0;
  EXPECT_EQ(scan->file_sha256, *sha256_hex_of_file(path, &size));
  EXPECT_EQ(scan->file_bytes, size);
  EXPECT_EQ(done.load(), size);
  uint64_t nans = 0;
  for (size_t i = 0; i < (*file)->chunks().size(); ++i) {
    EXPECT_EQ(scan->chunk_sha256[i], (*file)->chunks()[i].sha256) << (*file)->chunks()[i].label();
    nans += scan->chunk_nonfinite[i].nan;
  }
  EXPECT_EQ(nans, 1u);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, ShardScanTest, ::testing::Values(1, 100, 4096, kScanBlockBytes));

// With the header digest, padding is covered by no hash: the scan must find a non-zero byte there.
TEST(ShardScan, HeaderDigestScopeReportsNonZeroPadding) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state(), kFixtureStep, 1);
  const std::string path = fixture_shard_path(dir, 0);
  auto file = open_native_shard_file(path);
  ASSERT_TRUE(file.is_ok());
  // A payload whose end is not aligned, and which is not the last, leaves padding after it.
  uint64_t padding_at = 0;
  const uint64_t file_size = read_file_bytes(path).size();
  for (const auto& c : (*file)->chunks()) {
    const uint64_t end = c.data_offset + c.data_bytes;
    if (end % 64 != 0 && end < file_size && padding_at == 0) padding_at = end;
  }
  ASSERT_GT(padding_at, 0u);
  auto clean = scan_shard(path, **file, nullptr, 4096, ShardDigest::kNativeHeader);
  ASSERT_TRUE(clean.is_ok());
  EXPECT_EQ(clean->stray_byte_offset, -1);
  auto source = FileByteSource::open(path);
  EXPECT_EQ(clean->file_sha256, *native_shard_header_digest(**source));

  auto bytes = read_file_bytes(path);
  bytes[padding_at] = 0x5a;
  write_file_bytes(path, bytes);
  auto dirty = scan_shard(path, **file, nullptr, 4096, ShardDigest::kNativeHeader);
  ASSERT_TRUE(dirty.is_ok());
  EXPECT_EQ(dirty->stray_byte_offset, static_cast<int64_t>(padding_at));
}

}  // namespace
}  // namespace ckpt
