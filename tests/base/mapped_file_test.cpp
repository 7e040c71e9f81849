#include "base/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;
using testing::write_file_bytes;

std::vector<uint8_t> pages(size_t count, uint8_t seed) {
  std::vector<uint8_t> bytes(count * MappedFile::page_size());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 12));
  return bytes;
}

TEST(MappedFile, MapsTheWholeFileReadOnly) {
  TempDir dir;
  const auto bytes = pages(3, 1);
  write_file_bytes(dir / "a", bytes);
  auto mapped = MappedFile::open(dir / "a");
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  MappedFile::populate((*mapped)->data(), (*mapped)->size());
  ASSERT_EQ((*mapped)->size(), bytes.size());
  EXPECT_EQ(std::memcmp((*mapped)->data(), bytes.data(), bytes.size()), 0);
}

TEST(MappedFile, AnEmptyFileMapsToNoBytes) {
  TempDir dir;
  write_file_bytes(dir / "empty", {});
  auto mapped = MappedFile::open(dir / "empty");
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  EXPECT_EQ((*mapped)->size(), 0u);
}

TEST(MappedFile, AMissingFileIsAnIoErrorNamingIt) {
  TempDir dir;
  auto mapped = MappedFile::open(dir / "absent");
  ASSERT_FALSE(mapped.is_ok());
  EXPECT_EQ(mapped.status().code(), StatusCode::kIoError);
  EXPECT_NE(mapped.status().message().find("absent"), std::string::npos);
}

TEST(MappedFile, StitchesPageAlignedRangesOfTwoFilesIntoOneArray) {
  TempDir dir;
  const auto a = pages(4, 10);
  const auto b = pages(3, 200);
  write_file_bytes(dir / "a", a);
  write_file_bytes(dir / "b", b);
  auto sa = FileByteSource::open(dir / "a");
  auto sb = FileByteSource::open(dir / "b");
  ASSERT_TRUE(sa.is_ok() && sb.is_ok());
  const uint64_t page = MappedFile::page_size();
  // Pages 1-2 of a, then 1.5 pages of b starting at its page 1 (the last piece may end mid-page).
  const std::vector<MappedFile::FileRange> ranges = {{sa->get(), page, 2 * page},
                                                     {sb->get(), page, page + page / 2}};
  ASSERT_TRUE(MappedFile::can_stitch(ranges));
  auto stitched = MappedFile::stitch(ranges);
  ASSERT_TRUE(stitched.is_ok()) << stitched.status().to_string();
  std::vector<uint8_t> expected(a.begin() + page, a.begin() + 3 * page);
  expected.insert(expected.end(), b.begin() + page, b.begin() + 2 * page + page / 2);
  ASSERT_EQ((*stitched)->size(), expected.size());
  EXPECT_EQ(std::memcmp((*stitched)->data(), expected.data(), expected.size()), 0);
  MappedFile::populate((*stitched)->data(), (*stitched)->size());  // must not fault past the end
}

TEST(MappedFile, StitchRefusesWhatCannotBeMappedSideBySide) {
  TempDir dir;
  write_file_bytes(dir / "a", pages(4, 1));
  auto sa = FileByteSource::open(dir / "a");
  ASSERT_TRUE(sa.is_ok());
  const uint64_t page = MappedFile::page_size();
  const FileByteSource* s = sa->get();
  EXPECT_FALSE(MappedFile::can_stitch({}));
  EXPECT_FALSE(MappedFile::can_stitch({{s, 64, page}}));                   // offset not on a page
  EXPECT_FALSE(MappedFile::can_stitch({{s, 0, page + 8}, {s, 0, page}}));  // a middle piece ends mid-page
  EXPECT_FALSE(MappedFile::can_stitch({{s, 2 * page, 3 * page}}));         // runs past the file
  EXPECT_FALSE(MappedFile::can_stitch({{nullptr, 0, page}}));
  EXPECT_TRUE(MappedFile::can_stitch({{s, 0, page}, {s, 3 * page, 100}}));
  EXPECT_EQ(MappedFile::stitch({{s, 64, page}}).status().code(), StatusCode::kInvalidArgument);
}

// What another process does to a file we have mapped: shrinks it in place (same inode).
void shrink(const std::string& path, uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  ::close(fd);
}

TEST(GuardedCopy, CopiesAnIntactMapping) {
  TempDir dir;
  const auto bytes = pages(3, 5);
  write_file_bytes(dir / "a", bytes);
  auto mapped = MappedFile::open(dir / "a");
  ASSERT_TRUE(mapped.is_ok());
  std::vector<uint8_t> copy(bytes.size());
  ASSERT_TRUE(guarded_copy(copy.data(), (*mapped)->data(), copy.size(), "a").is_ok());
  EXPECT_EQ(copy, bytes);
  EXPECT_TRUE(guarded_copy(nullptr, nullptr, 0, "nothing").is_ok());
}

TEST(GuardedCopy, AFileShrunkWhileMappedIsAnIoErrorNamingFileAndOffset) {
  TempDir dir;
  const auto bytes = pages(3, 9);
  write_file_bytes(dir / "a", bytes);
  auto mapped = MappedFile::open(dir / "a");
  ASSERT_TRUE(mapped.is_ok());
  MappedFile::populate((*mapped)->data(), (*mapped)->size());  // resident pages are lost all the same
  const uint64_t page = MappedFile::page_size();
  shrink(dir / "a", page);
  std::vector<uint8_t> copy(bytes.size());
  const Status s = guarded_copy(copy.data(), (*mapped)->data(), copy.size(), "tensor x");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), dir / "a" + ": shrank while mapped (SIGBUS at offset " + std::to_string(page) + ")");
  // What is left of the file still reads, and the guard is reusable after a fault.
  ASSERT_TRUE(guarded_copy(copy.data(), (*mapped)->data(), page, "tensor x").is_ok());
  EXPECT_EQ(std::memcmp(copy.data(), bytes.data(), page), 0);
  EXPECT_FALSE(guarded_copy(copy.data(), (*mapped)->data() + 2 * page, 16, "tensor x").is_ok());
}

TEST(GuardedCopy, AStitchedMappingNamesThePieceThatShrank) {
  TempDir dir;
  write_file_bytes(dir / "a", pages(4, 10));
  write_file_bytes(dir / "b", pages(4, 20));
  auto sa = FileByteSource::open(dir / "a");
  auto sb = FileByteSource::open(dir / "b");
  ASSERT_TRUE(sa.is_ok() && sb.is_ok());
  const uint64_t page = MappedFile::page_size();
  auto stitched = MappedFile::stitch({{sa->get(), page, 2 * page}, {sb->get(), page, 3 * page}});
  ASSERT_TRUE(stitched.is_ok()) << stitched.status().to_string();
  shrink(dir / "b", 2 * page);  // b keeps its pages 0-1: the stitched piece loses b's pages 2-3
  std::vector<uint8_t> copy((*stitched)->size());
  const Status s = guarded_copy(copy.data(), (*stitched)->data(), copy.size(), "stitched");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            dir / "b" + ": shrank while mapped (SIGBUS at offset " + std::to_string(2 * page) + ")");
}

TEST(GuardedCopy, GuardsAreIndependentPerThread) {
  TempDir dir;
  write_file_bytes(dir / "a", pages(4, 1));
  write_file_bytes(dir / "b", pages(4, 2));
  auto a = MappedFile::open(dir / "a");
  auto b = MappedFile::open(dir / "b");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  shrink(dir / "a", 0);
  std::vector<Status> results(8, Status::ok());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> copy((*a)->size());
      for (int i = 0; i < 50 && results[t].is_ok(); ++i) {
        const MappedFile& from = t % 2 ? **a : **b;
        results[t] = guarded_copy(copy.data(), from.data(), from.size(), "x");
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < results.size(); ++t) {
    EXPECT_EQ(results[t].is_ok(), t % 2 == 0) << t << ": " << results[t].to_string();
  }
}

// The handler must not swallow a SIGBUS nobody guarded: the process still dies of it.
TEST(GuardedCopyDeathTest, AnUnguardedReadOfAShrunkMappingStillKills) {
  TempDir dir;
  write_file_bytes(dir / "a", pages(2, 3));
  auto mapped = MappedFile::open(dir / "a");
  ASSERT_TRUE(mapped.is_ok());
  uint8_t byte = 0;
  ASSERT_TRUE(guarded_copy(&byte, (*mapped)->data(), 1, "a").is_ok());  // the handler is installed
  shrink(dir / "a", 0);
  const volatile uint8_t* p = (*mapped)->data();
  EXPECT_DEATH((void)*p, "");
}

}  // namespace
}  // namespace ckpt
