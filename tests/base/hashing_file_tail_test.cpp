#include "base/hashing_file_tail.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "base/sha256.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::byte_pattern;
using testing::read_file_bytes;
using testing::TempDir;
using testing::write_file_bytes;

std::string sha256_of(const std::vector<uint8_t>& bytes, size_t offset, size_t length) {
  Sha256 h;
  h.update(bytes.data() + offset, length);
  return h.finish_hex();
}

// Another writer, as torch.save is: opens the file by name (truncating it) and appends, in writes
// of awkward sizes with pauses, so the tail both catches up and waits.
std::vector<uint8_t> append_by_name(const std::string& path, const std::vector<size_t>& sizes) {
  std::vector<uint8_t> all;
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  EXPECT_GE(fd, 0);
  uint8_t seed = 1;
  for (size_t size : sizes) {
    const auto bytes = byte_pattern(size, seed++);
    all.insert(all.end(), bytes.begin(), bytes.end());
    EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::close(fd);
  return all;
}

TEST(HashingFileTail, DigestsAreThoseOfTheBytesAnotherWriterAppendedPieceByPieceAndRangeByRange) {
  TempDir dir;
  const std::string path = dir / "out.pt";
  constexpr uint64_t kPiece = 100000;  // writes cross piece boundaries, the last piece is short
  auto tail = HashingFileTail::create_exclusive(path, kPiece);
  ASSERT_TRUE(tail.is_ok()) << tail.status().to_string();
  const auto all = append_by_name(path, {30, 65536, 1, 300007, 65535, 12, 150000});
  const std::vector<WrittenRange> ranges = {{300000, 1000, ""}, {5, 65536, ""}, {all.size() - 1, 1, ""}};
  auto digests = (*tail)->finish(ranges);
  ASSERT_TRUE(digests.is_ok()) << digests.status().to_string();
  ASSERT_EQ(read_file_bytes(path), all);
  EXPECT_EQ(digests->bytes, all.size());
  EXPECT_EQ(digests->sha256, sha256_of(all, 0, all.size()));
  ASSERT_EQ(digests->pieces.size(), (all.size() + kPiece - 1) / kPiece);
  for (size_t p = 0; p < digests->pieces.size(); ++p) {
    const size_t start = p * kPiece;
    EXPECT_EQ(digests->pieces[p], sha256_of(all, start, std::min<size_t>(kPiece, all.size() - start))) << p;
  }
  ASSERT_EQ(digests->ranges.size(), 3u);  // in file order
  for (const WrittenRange& r : digests->ranges)
    EXPECT_EQ(r.sha256, sha256_of(all, r.offset, r.bytes)) << r.offset;
  EXPECT_EQ(digests->ranges.front().offset, 5u);
  EXPECT_FALSE((*tail)->finish({}).is_ok());  // once
}

TEST(HashingFileTail, ARangeOutsideTheFileIsAnErrorNotADigest) {
  TempDir dir;
  const std::string path = dir / "short.pt";
  auto tail = HashingFileTail::create_exclusive(path, 1 << 20);
  ASSERT_TRUE(tail.is_ok());
  append_by_name(path, {100});
  auto digests = (*tail)->finish({{50, 51, ""}});
  ASSERT_FALSE(digests.is_ok());
  EXPECT_NE(digests.status().message().find("short.pt"), std::string::npos);
}

TEST(HashingFileTail, NeverTakesOverAnExistingFile) {
  TempDir dir;
  const std::string path = dir / "kept.pt";
  write_file_bytes(path, {1, 2, 3});
  auto tail = HashingFileTail::create_exclusive(path, 1 << 20);
  ASSERT_FALSE(tail.is_ok());
  EXPECT_NE(tail.status().message().find("kept.pt"), std::string::npos);
  EXPECT_EQ(read_file_bytes(path), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(HashingFileTail, AFileNobodyWroteHasTheDigestOfNoBytes) {
  TempDir dir;
  auto tail = HashingFileTail::create_exclusive(dir / "empty", 1 << 20);
  ASSERT_TRUE(tail.is_ok());
  auto digests = (*tail)->finish({});
  ASSERT_TRUE(digests.is_ok());
  EXPECT_EQ(digests->sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digests->bytes, 0u);
}

}  // namespace
}  // namespace ckpt
