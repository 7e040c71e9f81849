#include "base/mapped_file.h"

#include <gtest/gtest.h>

#include <cstring>

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

}  // namespace
}  // namespace ckpt
