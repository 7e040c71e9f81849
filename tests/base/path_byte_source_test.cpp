#include "base/path_byte_source.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdio.h>

#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;
using testing::write_file_bytes;

size_t open_descriptors() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (::readdir(d)) ++n;
  ::closedir(d);
  return n;
}

std::vector<uint8_t> counting(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  return bytes;
}

// A thousand sources hold no descriptor between reads, and each reads its own file's bytes.
TEST(PathByteSource, HoldsNoDescriptorAndReadsItsFile) {
  TempDir dir;
  const size_t before = open_descriptors();
  std::vector<std::unique_ptr<PathByteSource>> sources;
  for (int i = 0; i < 1000; ++i) {
    const std::string path = dir / ("f" + std::to_string(i));
    std::vector<uint8_t> bytes = counting(100);
    bytes[0] = static_cast<uint8_t>(i);
    write_file_bytes(path, bytes);
    auto s = PathByteSource::open(path);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    sources.push_back(std::move(*s));
  }
  EXPECT_EQ(open_descriptors(), before);
  uint8_t got[4];
  ASSERT_TRUE(sources[777]->read_at(0, got, 4).is_ok());
  EXPECT_EQ(got[0], static_cast<uint8_t>(777));
  EXPECT_EQ(got[3], counting(100)[3]);
  std::vector<uint8_t> scanned;
  ASSERT_TRUE(sources[5]
                  ->scan(10, 90, 16,
                         [&](uint64_t, const uint8_t* data, size_t n) {
                           scanned.insert(scanned.end(), data, data + n);
                         })
                  .is_ok());
  const std::vector<uint8_t> all = counting(100);
  EXPECT_EQ(scanned, std::vector<uint8_t>(all.begin() + 10, all.end()));
  EXPECT_EQ(open_descriptors(), before);
  EXPECT_EQ(sources[0]->size(), 100u);
  const Status past = sources[0]->read_at(98, got, 4);
  EXPECT_EQ(past.code(), StatusCode::kTruncated);
}

// A file replaced (renamed over) or rewritten to another size after it was opened is an error naming
// it, not the new file's bytes.
TEST(PathByteSource, AFileReplacedSinceOpeningIsAnError) {
  TempDir dir;
  const std::string path = dir / "item.distcp";
  write_file_bytes(path, counting(64));
  auto s = PathByteSource::open(path);
  ASSERT_TRUE(s.is_ok());
  write_file_bytes(dir / "other", std::vector<uint8_t>(64, 0xee));
  ASSERT_EQ(::rename((dir / "other").c_str(), path.c_str()), 0);
  uint8_t got[8];
  const Status replaced = (*s)->read_at(0, got, 8);
  EXPECT_EQ(replaced.code(), StatusCode::kIoError);
  EXPECT_NE(replaced.message().find(path + ": replaced since it was first opened"), std::string::npos)
      << replaced.message();

  auto t = PathByteSource::open(path);
  ASSERT_TRUE(t.is_ok());
  write_file_bytes(path, counting(32));  // the same inode, another size
  const Status shrunk = (*t)->read_at(0, got, 8);
  EXPECT_EQ(shrunk.code(), StatusCode::kIoError);
  EXPECT_NE(shrunk.message().find("64 bytes; now"), std::string::npos) << shrunk.message();

  ASSERT_EQ(::unlink(path.c_str()), 0);
  const Status gone = (*t)->read_at(0, got, 8);
  EXPECT_EQ(gone.code(), StatusCode::kIoError);
  EXPECT_NE(gone.message().find("cannot open"), std::string::npos) << gone.message();
}

}  // namespace
}  // namespace ckpt
