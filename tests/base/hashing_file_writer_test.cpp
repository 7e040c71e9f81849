#include "base/hashing_file_writer.h"

#include <gtest/gtest.h>

#include "base/byte_source.h"
#include "base/sha256.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::read_file_bytes;
using testing::TempDir;
using testing::write_file_bytes;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 9));
  return bytes;
}

std::string sha256_of(const std::vector<uint8_t>& bytes, size_t offset, size_t length) {
  Sha256 h;
  h.update(bytes.data() + offset, length);
  return h.finish_hex();
}

TEST(HashingFileWriter, DigestsAreThoseOfTheBytesOnDiskPieceByPieceAndWriteByWrite) {
  TempDir dir;
  const std::string path = dir / "out.pt";
  constexpr uint64_t kPiece = 100000;  // writes cross piece boundaries, the last piece is short
  auto writer = HashingFileWriter::create_exclusive(path, kPiece);
  ASSERT_TRUE(writer.is_ok()) << writer.status().to_string();
  std::vector<uint8_t> all;
  std::vector<std::pair<size_t, size_t>> large;  // offset, size of each write the writer records
  uint8_t seed = 1;
  for (size_t size : {30u, 65536u, 1u, 300007u, 65535u, 12u, 150000u}) {
    const auto bytes = pattern(size, seed++);
    if (size >= HashingFileWriter::kRecordedWriteBytes) large.push_back({all.size(), size});
    all.insert(all.end(), bytes.begin(), bytes.end());
    ASSERT_TRUE((*writer)->write(bytes.data(), bytes.size()).is_ok());
  }
  auto digests = (*writer)->finish();
  ASSERT_TRUE(digests.is_ok()) << digests.status().to_string();
  ASSERT_EQ(read_file_bytes(path), all);
  EXPECT_EQ(digests->bytes, all.size());
  EXPECT_EQ(digests->sha256, sha256_of(all, 0, all.size()));
  ASSERT_EQ(digests->pieces.size(), (all.size() + kPiece - 1) / kPiece);
  for (size_t p = 0; p < digests->pieces.size(); ++p) {
    const size_t start = p * kPiece;
    EXPECT_EQ(digests->pieces[p], sha256_of(all, start, std::min<size_t>(kPiece, all.size() - start))) << p;
  }
  ASSERT_EQ(digests->writes.size(), large.size());
  for (size_t i = 0; i < large.size(); ++i) {
    EXPECT_EQ(digests->writes[i].offset, large[i].first);
    EXPECT_EQ(digests->writes[i].bytes, large[i].second);
    EXPECT_EQ(digests->writes[i].sha256, sha256_of(all, large[i].first, large[i].second)) << i;
  }
  EXPECT_FALSE((*writer)->write(all.data(), 1).is_ok());  // finished: nothing more goes in
}

TEST(HashingFileWriter, NeverWritesIntoAnExistingFile) {
  TempDir dir;
  const std::string path = dir / "kept.pt";
  write_file_bytes(path, {1, 2, 3});
  auto writer = HashingFileWriter::create_exclusive(path, 1 << 20);
  ASSERT_FALSE(writer.is_ok());
  EXPECT_NE(writer.status().message().find("kept.pt"), std::string::npos);
  EXPECT_EQ(read_file_bytes(path), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(HashingFileWriter, AnEmptyFileHasTheDigestOfNoBytes) {
  TempDir dir;
  auto writer = HashingFileWriter::create_exclusive(dir / "empty", 1 << 20);
  ASSERT_TRUE(writer.is_ok());
  auto digests = (*writer)->finish();
  ASSERT_TRUE(digests.is_ok());
  EXPECT_EQ(digests->sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digests->bytes, 0u);
}

}  // namespace
}  // namespace ckpt
