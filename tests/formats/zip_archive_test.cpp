#include "formats/zip_archive.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "tests/support/byte_mutations.h"
#include "tests/support/test_paths.h"
#include "tests/support/zip_builder.h"

namespace ckpt {
namespace {

Result<ZipArchive> open_zip_bytes(std::vector<uint8_t> b) {
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

TEST(ZipArchive, FindsEveryEntryAmongManyInAnyOrder) {
  // find() is a binary search over names (issue 44): names out of order are found all the same.
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 300; i-- > 0;) entries.push_back({"a/data/" + std::to_string(i), "x" + std::to_string(i)});
  entries.push_back({"a/data.pkl", "p"});
  MemoryByteSource src(build_zip(entries), "a.pt");
  auto z = ZipArchive::open(src);
  ASSERT_TRUE(z.is_ok()) << z.status().to_string();
  for (int i : {0, 7, 150, 299}) {
    const ZipEntry* e = z->find("a/data/" + std::to_string(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(*z->read(src, *e, 100), "x" + std::to_string(i));
  }
  ASSERT_NE(z->find("a/data.pkl"), nullptr);
  EXPECT_EQ(z->find("a/data/300"), nullptr);
  EXPECT_EQ(z->find("a/data/"), nullptr);
  EXPECT_EQ(z->find(""), nullptr);
}

// Found by zip_fuzz (tests/data/zip/fuzz-torchscript-code-member-deflated.zip, fuzz/crashes/README.md):
// a torch.save zip with one member renamed under code/ and marked deflated. open() accepts it as a
// TorchScript code member; read() inflates it, finds no deflate stream (its bytes are a stored
// member's) and refuses it as corrupt, bounded and naming it; every stored member still reads.
TEST(ZipArchive, FuzzFoundDeflatedCodeMemberIsAcceptedButNeverRead) {
  const std::string path =
      std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/zip/fuzz-torchscript-code-member-deflated.zip";
  std::ifstream in(path, std::ios::binary);
  MemoryByteSource src(std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {}), path);
  auto z = ZipArchive::open(src);
  ASSERT_TRUE(z.is_ok()) << z.status().to_string();
  size_t compressed = 0;
  for (const ZipEntry& e : z->entries()) {
    auto read = z->read(src, e, 1u << 20);
    if (e.method == kZipStored) {
      EXPECT_TRUE(read.is_ok()) << e.name << ": " << read.status().to_string();
      continue;
    }
    ++compressed;
    EXPECT_TRUE(is_torchscript_code_member(e.name)) << e.name;
    ASSERT_FALSE(read.is_ok()) << e.name;
    EXPECT_EQ(read.status().code(), StatusCode::kCorruption) << read.status().to_string();
    EXPECT_NE(read.status().message().find("'" + e.name + "'"), std::string::npos)
        << read.status().to_string();
  }
  EXPECT_EQ(compressed, 1u);
}

TEST(ZipArchive, ReadsZip64EndRecords) {
  expect_entries(build_zip(kEntries, {true, 0}));
}

void expect_zip_error(std::vector<uint8_t> b, StatusCode code, const std::string& needle) {
  auto r = open_zip_bytes(std::move(b));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

TEST(ZipArchiveDefects, CompressedEntryNamed) {
  expect_zip_error(build_zip(kEntries, {false, 8}), StatusCode::kNotSupported,
                   "entry 'a/data.pkl': compression method 8");
}

TEST(ZipArchiveDefects, NoEndRecord) {
  expect_zip_error(std::vector<uint8_t>(64, 'x'), StatusCode::kCorruption, "no zip end");
}

TEST(ZipArchiveDefects, TooManyEntries) {
  auto b = build_zip(kEntries);
  const size_t end = b.size() - 22;
  b[end + 10] = 0xff;  // total entries 0xffff... without ZIP64 locator
  b[end + 11] = 0xfe;
  expect_zip_error(b, StatusCode::kCorruption, "entries");
}

TEST(ZipArchiveDefects, CentralDirectoryOutsideFile) {
  auto b = build_zip(kEntries);
  b[b.size() - 22 + 16 + 3] = 0x10;
  expect_zip_error(b, StatusCode::kCorruption, "does not fit");
}

TEST(ZipArchiveDefects, LocalHeaderOffsetOutsideFile) {
  auto b = build_zip(kEntries);
  const uint64_t cd = b[b.size() - 6] | (b[b.size() - 5] << 8);
  b[cd + 42 + 3] = 0x7f;
  expect_zip_error(b, StatusCode::kCorruption, "local header offset");
}

TEST(ZipArchiveDefects, BadLocalSignature) {
  auto b = build_zip(kEntries);
  b[0] = 'X';
  expect_zip_error(b, StatusCode::kCorruption, "bad local header signature");
}

TEST(ZipArchiveDefects, EntryRunsPastEnd) {
  auto b = build_zip(kEntries);
  const uint64_t cd = b[b.size() - 6] | (b[b.size() - 5] << 8);
  b[cd + 20 + 2] = 0x10;  // compressed and uncompressed size of entry 0 become huge
  b[cd + 24 + 2] = 0x10;
  expect_zip_error(b, StatusCode::kTruncated, "run past the end");
}

TEST(ZipArchiveDefects, BadZip64Locator) {
  auto b = build_zip(kEntries, {true, 0});
  const size_t loc = b.size() - 22 - 20;
  b[loc + 8 + 4] = 0x55;
  expect_zip_error(b, StatusCode::kCorruption, "ZIP64 end record");
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

// check_local_headers: every byte outside the members' data that no CRC-32 covers.
TEST(ZipArchiveLocalHeaders, AValidArchiveAndARealTorchSaveFilePass) {
  for (bool zip64 : {false, true}) {
    const auto b = build_zip(kEntries, {zip64, 0});
    MemoryByteSource src(b, "a.pt");
    auto z = ZipArchive::open(src);
    ASSERT_TRUE(z.is_ok());
    EXPECT_TRUE(z->check_local_headers(src).is_ok()) << z->check_local_headers(src).to_string();
  }
  std::ifstream in(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt",
                   std::ios::binary);
  const std::vector<uint8_t> torch_file(std::istreambuf_iterator<char>(in), {});
  MemoryByteSource src(torch_file, "model_state.pt");
  auto z = ZipArchive::open(src);
  ASSERT_TRUE(z.is_ok());
  EXPECT_TRUE(z->check_local_headers(src).is_ok()) << z->check_local_headers(src).to_string();
}

// Every byte of every local header, name, extra field and data descriptor of a real torch.save
// file, flipped one at a time, is caught by check_local_headers or by the CRC-32 check, or makes
// the archive unreadable: no byte outside the central directory goes unseen.
TEST(ZipArchiveLocalHeaders, EveryFlippedByteBeforeTheCentralDirectoryIsCaught) {
  std::ifstream in(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt",
                   std::ios::binary);
  const std::vector<uint8_t> valid(std::istreambuf_iterator<char>(in), {});
  MemoryByteSource valid_src(valid, "model_state.pt");
  auto valid_zip = ZipArchive::open(valid_src);
  ASSERT_TRUE(valid_zip.is_ok());
  uint64_t directory = valid.size();
  for (size_t i = valid.size() - 21; i-- > 0;) {  // the end record's central directory offset
    if (valid[i] == 'P' && valid[i + 1] == 'K' && valid[i + 2] == 5 && valid[i + 3] == 6) {
      directory = valid[i + 16] | valid[i + 17] << 8 | valid[i + 18] << 16 | uint64_t{valid[i + 19]} << 24;
      break;
    }
  }
  ASSERT_LT(directory, valid.size());
  size_t by_header = 0;
  for (uint64_t at = 0; at < directory; ++at) {
    auto b = valid;
    b[at] ^= 0x01;
    MemoryByteSource src(b, "m.pt");
    auto z = ZipArchive::open(src);
    if (!z.is_ok()) continue;
    const Status headers = z->check_local_headers(src);
    if (!headers.is_ok()) {
      ++by_header;
      EXPECT_NE(headers.message().find("m.pt: "), std::string::npos);
      continue;
    }
    EXPECT_FALSE(z->check_crc32(src).is_ok()) << "byte at " << at << " flipped unseen";
  }
  EXPECT_GT(by_header, 100u);
}

// miniz (torch.load) finds a member ignoring case, by a binary search that may land on either of
// two such names; zipfile takes the last of two equal names. Either pair is refused, naming both.
TEST(ZipArchiveDefects, NamesEqualIgnoringCaseAreRefusedNamingBoth) {
  for (const char* twin : {"a/DATA.PKL", "a/data.pkl", "A/Data.Pkl"}) {
    auto z = open_zip_bytes(build_zip({{"a/data.pkl", "harmless"}, {"a/data/0", "0123"}, {twin, "evil"}}));
    ASSERT_FALSE(z.is_ok()) << twin;
    EXPECT_EQ(z.status().code(), StatusCode::kAmbiguous) << z.status().to_string();
    EXPECT_NE(z.status().message().find("'a/data.pkl'"), std::string::npos) << z.status().to_string();
    EXPECT_NE(z.status().message().find(std::string("'") + twin + "'"), std::string::npos)
        << z.status().to_string();
  }
  EXPECT_TRUE(
      open_zip_bytes(build_zip({{"a/data.pkl", "p"}, {"a/data/0", "0"}, {"a/data/00", "1"}})).is_ok());
}

// miniz takes the last end-record signature with 22 bytes after it, whatever the comment length of
// the record before it says: a second end record hidden in the first one's comment is refused.
TEST(ZipArchiveDefects, SecondEndRecordInsideTheCommentIsRefused) {
  std::vector<uint8_t> b = build_zip(kEntries);
  const std::vector<uint8_t> end_record(b.end() - 22, b.end());
  b[b.size() - 2] = 22;  // the comment now holds a copy of the end record
  b.insert(b.end(), end_record.begin(), end_record.end());
  auto z = open_zip_bytes(b);
  ASSERT_FALSE(z.is_ok());
  EXPECT_EQ(z.status().code(), StatusCode::kAmbiguous) << z.status().to_string();
  EXPECT_NE(z.status().message().find("second zip end record"), std::string::npos) << z.status().to_string();
  // The same bytes in the comment with the signature broken are only a comment.
  b[b.size() - 22] = 'Q';
  EXPECT_TRUE(open_zip_bytes(b).is_ok());
}

}  // namespace
}  // namespace ckpt
