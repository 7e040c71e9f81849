#include "verifier/tensors/shard_scan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/native_shard_format.h"
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
    EXPECT_EQ(digest_hex(scan->chunk_sha256[i]), (*file)->chunks()[i].sha256) << (*file)->chunks()[i].label();
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
  auto clean = scan_shard(path, **file, nullptr, 4096, ShardDigest::kHeader);
  ASSERT_TRUE(clean.is_ok());
  EXPECT_EQ(clean->stray_byte_offset, -1);
  auto source = FileByteSource::open(path);
  EXPECT_EQ(clean->file_sha256, *native_shard_header_digest(**source));

  auto bytes = read_file_bytes(path);
  bytes[padding_at] = 0x5a;
  write_file_bytes(path, bytes);
  auto dirty = scan_shard(path, **file, nullptr, 4096, ShardDigest::kHeader);
  ASSERT_TRUE(dirty.is_ok());
  EXPECT_EQ(dirty->stray_byte_offset, static_cast<int64_t>(padding_at));
}

ChunkInfo payload_at(uint64_t offset, uint64_t bytes) {
  ChunkInfo c;
  c.data_offset = offset;
  c.data_bytes = bytes;
  return c;
}

// Units start at payload starts, each at least unit_bytes long but the last, the first holds the
// header, together they tile the file and list every chunk once in file order.
TEST(ShardScan, PlanCutsAtPayloadStartsAndTilesTheFile) {
  // Offsets out of order on purpose: the plan follows `order`.
  const std::vector<ChunkInfo> chunks = {payload_at(1000, 100), payload_at(100, 500), payload_at(600, 0),
                                         payload_at(640, 300), payload_at(1100, 4000)};
  const std::vector<size_t> order = {1, 2, 3, 0, 4};
  const auto units = plan_scan_units(scan_chunks(chunks), order, 5200, ShardDigest::kHeader, 600);
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].begin, 0u);
  EXPECT_EQ(units[0].end, 600u);  // 600 bytes reached where the zero-byte chunk starts
  EXPECT_EQ(units[0].first, 0u);
  EXPECT_EQ(units[0].last, 1u);
  EXPECT_EQ(units[1].begin, 600u);  // 40, 400, 500 bytes in at the next starts: no cut before the end
  EXPECT_EQ(units[1].end, 5200u);
  EXPECT_EQ(units[1].first, 1u);
  EXPECT_EQ(units[1].last, 5u);

  const auto each = plan_scan_units(scan_chunks(chunks), order, 5200, ShardDigest::kHeader, 1);
  ASSERT_EQ(each.size(), 5u);
  for (size_t u = 0; u < each.size(); ++u) {
    EXPECT_EQ(each[u].first, u);
    EXPECT_EQ(each[u].last, u + 1);
    if (u) {
      EXPECT_EQ(each[u].begin, each[u - 1].end);
    }
  }
  EXPECT_EQ(each.back().end, 5200u);

  // A whole-file digest is one sequential hash: never split.
  const auto whole = plan_scan_units(scan_chunks(chunks), order, 5200, ShardDigest::kWholeFile, 1);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].end, 5200u);
  EXPECT_EQ(whole[0].last, 5u);
  EXPECT_EQ(plan_scan_units({}, {}, 77, ShardDigest::kHeader, 1).size(), 1u);

  // Without a shard digest the first unit starts at the first payload: the header is not read.
  const auto payloads = plan_scan_units(scan_chunks(chunks), order, 5200, ShardDigest::kNone, 600);
  ASSERT_EQ(payloads.size(), 2u);
  EXPECT_EQ(payloads[0].begin, 100u);
  EXPECT_EQ(payloads[0].end, 1000u);  // 600 bytes in from 100: the chunk at 1000
  EXPECT_EQ(payloads[0].last, 3u);
  EXPECT_EQ(payloads[1].begin, 1000u);
  EXPECT_EQ(payloads[1].end, 5200u);
  EXPECT_EQ(plan_scan_units(scan_chunks(chunks), order, 5200, ShardDigest::kNone, 0)[0].begin, 100u);

  // A header checked already is not read again: the first unit starts where it ends.
  const auto after_header =
      plan_scan_units(scan_chunks(chunks), order, 5200, ShardDigest::kHeaderChecked, 600, 64);
  ASSERT_EQ(after_header.size(), 2u);
  EXPECT_EQ(after_header[0].begin, 64u);
  EXPECT_EQ(after_header[1].end, 5200u);
}

// A scan without a shard digest gives the chunks' digests a header-digest scan gives, and no shard
// digest; a damaged header byte, which it never reads, changes nothing, and a damaged payload byte
// changes that chunk's digest.
TEST(ShardScan, PayloadsOnlyScanReadsNoHeaderByte) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const std::string path = fixture_shard_path(dir, 0);
  auto file = open_native_shard_file(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  auto scan = [&](ShardDigest digest) {
    auto scanner = ShardScanner::plan(path, **file, digest, /*unit_bytes=*/1);
    EXPECT_TRUE(scanner.is_ok()) << scanner.status().to_string();
    std::vector<ScanTask> tasks;
    for (size_t u = 0; u < scanner->unit_count(); ++u) tasks.push_back({&*scanner, u});
    scan_units_in_parallel(tasks, 2, nullptr, {});
    auto done = scanner->finish();
    EXPECT_TRUE(done.is_ok()) << done.status().to_string();
    return *done;
  };
  const ShardScan header = scan(ShardDigest::kHeader);
  const ShardScan payloads = scan(ShardDigest::kNone);
  EXPECT_FALSE(header.file_sha256.empty());
  EXPECT_TRUE(payloads.file_sha256.empty());
  EXPECT_EQ(payloads.chunk_sha256, header.chunk_sha256);

  auto bytes = read_file_bytes(path);
  bytes[kNativePreambleBytes + 3] ^= 0x20;
  write_file_bytes(path, bytes);
  EXPECT_EQ(scan(ShardDigest::kNone).chunk_sha256, header.chunk_sha256);
  EXPECT_NE(scan(ShardDigest::kHeader).file_sha256, header.file_sha256);

  const ChunkInfo& first = (*file)->chunks()[0];
  bytes[first.data_offset] ^= 0x20;
  write_file_bytes(path, bytes);
  const ShardScan damaged = scan(ShardDigest::kNone);
  EXPECT_NE(damaged.chunk_sha256[0], header.chunk_sha256[0]);
  for (size_t i = 1; i < header.chunk_sha256.size(); ++i)
    EXPECT_EQ(damaged.chunk_sha256[i], header.chunk_sha256[i]);
}

TEST(ShardScan, UnitLengthAimsAtManyUnitsPerWorkerWithinBounds) {
  EXPECT_EQ(scan_unit_bytes(8192ull << 20, 2), kScanUnitBytes);  // 128 MiB each: capped
  EXPECT_EQ(scan_unit_bytes(2048ull << 20, 2), (2048ull << 20) / kScanUnitsPerWorker / 2);
  EXPECT_EQ(scan_unit_bytes(1ull << 20, 8), kMinScanUnitBytes);                       // tiny: floored
  EXPECT_EQ(scan_unit_bytes(256ull << 20, 0), (256ull << 20) / kScanUnitsPerWorker);  // 0 threads: 1
}

// Split into one unit per payload and scanned out of order (as parallel workers may), the scan
// equals the single-unit one, and padding damage is still found, at its lowest offset.
TEST(ShardScan, UnitsScannedInAnyOrderAgreeWithOneUnit) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state(), kFixtureStep, 1);
  const std::string path = fixture_shard_path(dir, 0);
  auto file = open_native_shard_file(path);
  ASSERT_TRUE(file.is_ok());
  auto whole = scan_shard(path, **file, nullptr, 4096, ShardDigest::kHeader);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  auto scan_split = [&]() {
    auto scanner = ShardScanner::plan(path, **file, ShardDigest::kHeader, /*unit_bytes=*/1);
    EXPECT_TRUE(scanner.is_ok());
    EXPECT_GT(scanner->unit_count(), 2u);
    std::atomic<uint64_t> done{0};
    for (size_t u = scanner->unit_count(); u-- > 0;) scanner->scan_unit(u, &done, 100);
    EXPECT_EQ(done.load(), read_file_bytes(path).size());
    return scanner->finish();
  };
  auto split = scan_split();
  ASSERT_TRUE(split.is_ok()) << split.status().to_string();
  EXPECT_EQ(split->file_sha256, whole->file_sha256);
  EXPECT_EQ(split->chunk_sha256, whole->chunk_sha256);
  EXPECT_EQ(split->stray_byte_offset, -1);

  std::vector<uint64_t> padding;  // every byte after an unaligned payload end, before the next
  const uint64_t file_size = read_file_bytes(path).size();
  for (const auto& c : (*file)->chunks()) {
    const uint64_t end = c.data_offset + c.data_bytes;
    if (end % 64 != 0 && end < file_size) padding.push_back(end);
  }
  ASSERT_GE(padding.size(), 2u);
  std::sort(padding.begin(), padding.end());
  auto bytes = read_file_bytes(path);
  bytes[padding[padding.size() - 1]] = 1;
  bytes[padding[padding.size() - 2]] = 2;
  write_file_bytes(path, bytes);
  auto dirty = scan_split();
  ASSERT_TRUE(dirty.is_ok());
  EXPECT_EQ(dirty->stray_byte_offset, static_cast<int64_t>(padding[padding.size() - 2]));
}

// Verify's workers step two units at once and hash their blocks together. Units of two shards and
// a whole-file scan of one of them, interleaved, must give exactly what each scan gives alone; a
// shard whose file changed fails alone, named, and leaves the others' results intact.
TEST(ShardScan, TwoUnitsAtATimeAgreeWithOneAtATimeAndKeepFailuresApart) {
  TempDir root;
  auto state = full_training_state();
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(find_state_tensor(state, "model.blocks.0.w")->bytes.data() + 4, &inf, 4);
  const std::string dir = save_training_state(root.path(), state, kFixtureStep, 2);
  const std::string paths[2] = {fixture_shard_path(dir, 0), fixture_shard_path(dir, 1)};
  std::unique_ptr<TensorFile> files[2];
  for (int i = 0; i < 2; ++i) {
    auto file = open_native_shard_file(paths[i]);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    files[i] = std::move(*file);
  }
  struct Case {
    int shard;
    ShardDigest digest;
  };
  const Case cases[] = {{0, ShardDigest::kHeader}, {1, ShardDigest::kHeader}, {0, ShardDigest::kWholeFile}};
  std::vector<ShardScan> alone;
  for (const Case& c : cases) {
    auto scan = scan_shard(paths[c.shard], *files[c.shard], nullptr, 4096, c.digest);
    ASSERT_TRUE(scan.is_ok()) << scan.status().to_string();
    alone.push_back(*scan);
  }
  for (bool damage : {false, true}) {
    for (size_t block : {size_t{100}, size_t{4096}}) {
      std::vector<ShardScanner> scanners;
      for (const Case& c : cases) {
        auto scanner = ShardScanner::plan(paths[c.shard], *files[c.shard], c.digest, /*unit_bytes=*/1);
        ASSERT_TRUE(scanner.is_ok()) << scanner.status().to_string();
        scanners.push_back(std::move(*scanner));
      }
      ASSERT_GT(scanners[0].unit_count(), 2u);
      std::vector<ScanTask> tasks;  // round robin over the scanners, so pairs mix shards
      for (size_t u = 0; tasks.size() < scanners[0].unit_count() + scanners[1].unit_count() + 1; ++u) {
        for (auto& s : scanners) {
          if (u < s.unit_count()) tasks.push_back({&s, u});
        }
      }
      if (damage) {
        ASSERT_EQ(::truncate(paths[1].c_str(), 100), 0);
      }
      std::atomic<uint64_t> done{0};
      size_t next = 0;
      scan_units_two_at_a_time(
          [&]() -> std::optional<ScanTask> {
            if (next == tasks.size()) return std::nullopt;
            return tasks[next++];
          },
          &done, block);
      for (size_t i = 0; i < scanners.size(); ++i) {
        auto scan = scanners[i].finish();
        if (damage && cases[i].shard == 1) {
          ASSERT_FALSE(scan.is_ok());
          EXPECT_NE(scan.status().message().find(paths[1]), std::string::npos) << scan.status().to_string();
          EXPECT_NE(scan.status().message().find("changed size"), std::string::npos)
              << scan.status().to_string();
          continue;
        }
        ASSERT_TRUE(scan.is_ok()) << "scan " << i << ", block " << block << ": " << scan.status().to_string();
        EXPECT_EQ(scan->file_sha256, alone[i].file_sha256) << "scan " << i << ", block " << block;
        EXPECT_EQ(scan->chunk_sha256, alone[i].chunk_sha256) << "scan " << i << ", block " << block;
        EXPECT_EQ(scan->stray_byte_offset, -1);
        uint64_t infs = 0;
        for (const auto& n : scan->chunk_nonfinite) infs += n.inf;
        uint64_t infs_alone = 0;
        for (const auto& n : alone[i].chunk_nonfinite) infs_alone += n.inf;
        EXPECT_EQ(infs, infs_alone);
      }
      if (damage) break;
    }
  }
  // The one Inf was seen (in whichever shard holds it): the comparison above was not vacuous.
  uint64_t infs = 0;
  for (int i = 0; i < 2; ++i) {
    for (const auto& n : alone[i].chunk_nonfinite) infs += n.inf;
  }
  EXPECT_EQ(infs, 1u);
}

}  // namespace
}  // namespace ckpt
