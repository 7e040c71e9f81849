#include "base/byte_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;
using testing::write_file_bytes;

constexpr uint64_t kMiB = 1 << 20;

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> bytes(n);
  uint32_t x = 12345;
  for (auto& b : bytes) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return bytes;
}

// What a scan handed out, checked against the file: every byte once, in order, blocks bounded.
struct Collected {
  std::vector<uint8_t> bytes;
  uint64_t first_offset = UINT64_MAX;
  size_t largest_block = 0;
  bool in_order = true;
};

BlockVisitor collect(Collected& c) {
  return [&c](uint64_t offset, const uint8_t* data, size_t n) {
    if (c.first_offset == UINT64_MAX) c.first_offset = offset;
    if (offset != c.first_offset + c.bytes.size()) c.in_order = false;
    c.bytes.insert(c.bytes.end(), data, data + n);
    c.largest_block = std::max(c.largest_block, n);
  };
}

// A range that starts and ends mid-page comes out exactly, in blocks no larger than asked for.
TEST(ByteSourceScan, AFileHandsOutExactlyTheRangeInOrderInBoundedBlocks) {
  TempDir dir;
  const auto bytes = pattern(9 * kMiB + 777);
  write_file_bytes(dir / "f", bytes);
  auto file = FileByteSource::open(dir / "f");
  ASSERT_TRUE(file.is_ok());
  const uint64_t offset = 4096 + 5, length = bytes.size() - offset - 13;
  Collected c;
  ASSERT_TRUE((*file)->scan(offset, length, 100000, collect(c)).is_ok());
  EXPECT_EQ(c.first_offset, offset);
  EXPECT_TRUE(c.in_order);
  EXPECT_LE(c.largest_block, 100000u);
  ASSERT_EQ(c.bytes.size(), length);
  EXPECT_TRUE(
      std::equal(c.bytes.begin(), c.bytes.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset)));
}

// A file that another process shrinks under the scan is a kTruncated error naming it and the offset.
TEST(ByteSourceScan, AFileThatShrinksDuringTheScanIsTruncatedNamingIt) {
  TempDir dir;
  write_file_bytes(dir / "f", pattern(3 * kMiB));
  auto file = FileByteSource::open(dir / "f");
  ASSERT_TRUE(file.is_ok());
  size_t blocks = 0;
  uint64_t read_through = 0;  // bytes the visitor finished reading
  unsigned sum = 0;
  const std::string path = dir / "f";
  // After the second block, another process cuts the file to 1 MiB.
  const Status s = (*file)->scan(0, 3 * kMiB, 256 << 10, [&](uint64_t offset, const uint8_t* data, size_t n) {
    if (blocks++ == 1) {
      ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kMiB)), 0);
    }
    for (size_t i = 0; i < n; ++i) sum += data[i];
    read_through = offset + n;
  });
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kTruncated) << s.to_string();
  EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("shrank"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("offset " + std::to_string(kMiB)), std::string::npos) << s.message();
  EXPECT_EQ(read_through, kMiB) << "the bytes that remain are read, the lost ones are not";
  EXPECT_NE(sum, 0u);
}

TEST(ByteSourceScan, ARangePastTheEndIsTruncatedNamingTheFile) {
  TempDir dir;
  write_file_bytes(dir / "f", pattern(1000));
  auto file = FileByteSource::open(dir / "f");
  ASSERT_TRUE(file.is_ok());
  Collected c;
  const Status s = (*file)->scan(900, 200, 64, collect(c));
  EXPECT_EQ(s.code(), StatusCode::kTruncated);
  EXPECT_EQ(s.message(), dir / "f" + ": read of 200 bytes at offset 900 past end (1000 bytes)");
  EXPECT_TRUE(c.bytes.empty());
}

// A source that only reads, to exercise ByteSource's own scan (what files use).
class ReadOnlySource final : public ByteSource {
 public:
  explicit ReadOnlySource(const MemoryByteSource& inner) : inner_(inner) {}
  uint64_t size() const override { return inner_.size(); }
  Status read_at(uint64_t offset, void* out, size_t length) const override {
    return inner_.read_at(offset, out, length);
  }
  const std::string& name() const override { return inner_.name(); }

 private:
  const MemoryByteSource& inner_;
};

TEST(ByteSourceScan, MemoryAndReadingSourcesScanTheSameBlocks) {
  const auto bytes = pattern(10000);
  MemoryByteSource memory(bytes);
  ReadOnlySource reading(memory);
  Collected a, b;
  ASSERT_TRUE(memory.scan(17, 9000, 1000, collect(a)).is_ok());
  ASSERT_TRUE(reading.scan(17, 9000, 1000, collect(b)).is_ok());
  EXPECT_EQ(a.bytes, std::vector<uint8_t>(bytes.begin() + 17, bytes.begin() + 9017));
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.first_offset, 17u);
  EXPECT_TRUE(a.in_order && b.in_order);
  EXPECT_EQ(a.largest_block, 1000u);
  EXPECT_EQ(b.largest_block, 1000u);
  EXPECT_EQ(memory.scan(9000, 2000, 1000, collect(a)).code(), StatusCode::kTruncated);
  EXPECT_EQ(reading.scan(9000, 2000, 1000, collect(b)).code(), StatusCode::kTruncated);
}

}  // namespace
}  // namespace ckpt
