#include "formats/zip_archive.h"

#include <gtest/gtest.h>

#include "tests/support/byte_mutations.h"
#include "tests/support/zip_builder.h"

namespace ckpt {
namespace {

Result<ZipArchive> open_bytes(std::vector<uint8_t> b) {
  MemoryByteSource src(std::move(b), "a.pt");
  return ZipArchive::open(src);
}

const std::vector<std::pair<std::string, std::string>> kEntries = {{"a/data.pkl", "hello"},
                                                                   {"a/data/0", "0123456789"}};

void expect_entries(const std::vector<uint8_t>& b) {
  MemoryByteSource src(b, "a.pt");
  auto z = ZipArchive::open(src);
  ASSERT_TRUE(z.is_ok()) << z.status().to_string();
  ASSERT_EQ(z->entries().size(), 2u);
  const ZipEntry* e = z->find("a/data/0");
  ASSERT_NE(e, nullptr);
  auto text = z->read(src, *e, 100);
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, "0123456789");
  EXPECT_FALSE(z->read(src, *e, 5).is_ok());
}

TEST(ZipArchive, ReadsStoredEntries) {
  expect_entries(build_zip(kEntries));
}

TEST(ZipArchive, ReadsZip64EndRecords) {
  expect_entries(build_zip(kEntries, {true, 0}));
}

void expect_error(std::vector<uint8_t> b, StatusCode code, const std::string& needle) {
  auto r = open_bytes(std::move(b));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

TEST(ZipArchiveDefects, CompressedEntryNamed) {
  expect_error(build_zip(kEntries, {false, 8}), StatusCode::kNotSupported,
               "entry 'a/data.pkl': compression method 8");
}

TEST(ZipArchiveDefects, NoEndRecord) {
  expect_error(std::vector<uint8_t>(64, 'x'), StatusCode::kCorruption, "no zip end");
}

TEST(ZipArchiveDefects, TooManyEntries) {
  auto b = build_zip(kEntries);
  const size_t end = b.size() - 22;
  b[end + 10] = 0xff;  // total entries 0xffff... without ZIP64 locator
  b[end + 11] = 0xfe;
  expect_error(b, StatusCode::kCorruption, "entries");
}

TEST(ZipArchiveDefects, CentralDirectoryOutsideFile) {
  auto b = build_zip(kEntries);
  b[b.size() - 22 + 16 + 3] = 0x10;
  expect_error(b, StatusCode::kCorruption, "does not fit");
}

TEST(ZipArchiveDefects, LocalHeaderOffsetOutsideFile) {
  auto b = build_zip(kEntries);
  const uint64_t cd = b[b.size() - 6] | (b[b.size() - 5] << 8);
  b[cd + 42 + 3] = 0x7f;
  expect_error(b, StatusCode::kCorruption, "local header offset");
}

TEST(ZipArchiveDefects, BadLocalSignature) {
  auto b = build_zip(kEntries);
  b[0] = 'X';
  expect_error(b, StatusCode::kCorruption, "bad local header signature");
}

TEST(ZipArchiveDefects, EntryRunsPastEnd) {
  auto b = build_zip(kEntries);
  const uint64_t cd = b[b.size() - 6] | (b[b.size() - 5] << 8);
  b[cd + 20 + 2] = 0x10;  // compressed and uncompressed size of entry 0 become huge
  b[cd + 24 + 2] = 0x10;
  expect_error(b, StatusCode::kTruncated, "run past the end");
}

TEST(ZipArchiveDefects, BadZip64Locator) {
  auto b = build_zip(kEntries, {true, 0});
  const size_t loc = b.size() - 22 - 20;
  b[loc + 8 + 4] = 0x55;
  expect_error(b, StatusCode::kCorruption, "ZIP64 end record");
}

TEST(ZipArchive, MutationsNeverCrash) {
  for (bool zip64 : {false, true}) {
    const auto valid = build_zip(kEntries, {zip64, 0});
    std::mt19937_64 rng(zip64 ? 11 : 12);
    for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
      MemoryByteSource src(mutate(valid, rng), "fuzz");
      auto z = ZipArchive::open(src);
      if (!z.is_ok()) continue;
      for (const auto& e : z->entries()) EXPECT_TRUE(z->read(src, e, 1 << 20).is_ok());
    }
  }
}

}  // namespace
}  // namespace ckpt
