#include "formats/tensor_file_open.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "base/file_io.h"
#include "formats/hdf5_file.h"
#include "formats/mapped_tensor_file.h"
#include "formats/safetensors_file.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

std::vector<ChunkPayload> one_chunk(const float* data) {
  return {
      {{"model.w", "model", DType::kF32, {2}, {0}, {2}, 0, 8, ""}, reinterpret_cast<const uint8_t*>(data)}};
}

TEST(OpenTensorFile, SniffsSafetensors) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  const float w[2] = {1, 2};
  ASSERT_TRUE(write_safetensors_file(dir + "/x.bin", one_chunk(w), {}).is_ok());
  auto r = open_tensor_file(dir + "/x.bin");  // extension says nothing
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "safetensors");
}

#ifdef CKPTCHECK_WITH_HDF5
TEST(OpenTensorFile, SniffsHdf5) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  const float w[2] = {1, 2};
  ASSERT_TRUE(write_hdf5_file(dir + "/x.dat", one_chunk(w), {}).is_ok());
  auto r = open_tensor_file(dir + "/x.dat");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "hdf5");
}
#endif

TEST(OpenTensorFile, SniffsPytorch) {
  auto r = open_tensor_file(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "pytorch");
}

TEST(OpenTensorFile, UnknownBytesNameTheirHex) {
  const testing::TempDir scratch;
  const std::string path = scratch / "junk";
  ASSERT_TRUE(write_file_atomically(path, std::string("\x01\x02\xfe\x03junk", 8)).is_ok());
  auto r = open_tensor_file(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(r.status().message().find("unknown tensor file format (first bytes 0102fe036a756e6b)"),
            std::string::npos)
      << r.status().to_string();
}

TEST(OpenTensorFile, NativeMagicGoesToTheNativeReader) {
  const testing::TempDir scratch;
  const std::string path = scratch / "s.cks";
  ASSERT_TRUE(write_file_atomically(path, std::string("CKPTSHD\0rest", 12)).is_ok());
  auto r = open_tensor_file(path);
  ASSERT_FALSE(r.is_ok());
  // The native reader's own complaint: too short for its preamble.
  EXPECT_EQ(r.status().code(), StatusCode::kTruncated) << r.status().to_string();
  EXPECT_NE(r.status().message().find("preamble"), std::string::npos);
}

bool sniff_test_magic(const uint8_t* head, size_t n) {
  return n >= 4 && std::memcmp(head, "TST!", 4) == 0;
}
Result<std::unique_ptr<TensorFile>> open_test_format(const std::string& path) {
  return std::unique_ptr<TensorFile>(
      new MappedTensorFile("test", std::make_unique<MemoryByteSource>(std::vector<uint8_t>{}, path), {},
                           nlohmann::json::object()));
}

TEST(OpenTensorFile, RegisteredOpenerIsUsed) {
  register_tensor_file_opener("test", sniff_test_magic, open_test_format);
  const testing::TempDir scratch;
  const std::string path = scratch / "t";
  ASSERT_TRUE(write_file_atomically(path, "TST!payload").is_ok());
  auto r = open_tensor_file(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "test");
}

TEST(OpenTensorFile, NonCheckpointsAreNamedForWhatTheyAre) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  const std::pair<std::string, std::string> cases[] = {
      {"", "an empty file (0 bytes)"},
      {"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1024\n",
       "a Git LFS pointer, not the file: run `git lfs pull`"},
      {"\n<!DOCTYPE html><html><body>404</body></html>", "an HTML page"},
      {"<HTML><head>", "an HTML page"},
      {std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), "a PNG image"},
      {std::string("\x1f\x8b\x08\0\0\0\0\0", 8), "gzip-compressed data: decompress it first"},
      {std::string("\x28\xb5\x2f\xfd\0", 5), "zstd-compressed data"},
      {"GGUF\x03\0\0\0", "a GGUF file"},
      // A pickle cut short before it names any global: nothing a loader would run (a pickle that
      // names one is judged by the gate instead: tests/cli/pickle_gate_test.cpp).
      {std::string("\x80\x04\x95\x10\0\0\0", 7),
       "a pickle that CPython's unpickler rejects before it names any global"},
      {"just some notes\n", "a text file"},
  };
  int k = 0;
  for (const auto& [bytes, what] : cases) {
    const std::string path = dir + "/f" + std::to_string(k++);
    testing::write_file_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    auto r = open_tensor_file(path);
    ASSERT_FALSE(r.is_ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
    EXPECT_NE(r.status().message().find(path + ": " + what), std::string::npos) << r.status().to_string();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line: " << r.status().to_string();
  }
}

TEST(OpenTensorFile, TarArchiveIsNamed) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  std::vector<uint8_t> tar(512, 0);
  std::memcpy(tar.data(), "model.pt", 8);
  std::memcpy(tar.data() + 257, "ustar", 5);
  testing::write_file_bytes(dir + "/t", tar);
  auto r = open_tensor_file(dir + "/t");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("a tar archive"), std::string::npos) << r.status().to_string();
}

TEST(OpenTensorFile, SniffsLegacyTorchSave) {
  auto r = open_tensor_file(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/legacy_model_state.pt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "pytorch");
  EXPECT_FALSE((*r)->chunks().empty());
}

}  // namespace
}  // namespace ckpt
