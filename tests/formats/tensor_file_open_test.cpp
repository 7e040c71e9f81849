#include "formats/tensor_file_open.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "base/file_io.h"
#include "formats/hdf5_file.h"
#include "formats/mapped_tensor_file.h"
#include "formats/safetensors_file.h"

namespace ckpt {
namespace {

std::string temp_dir() {
  std::string t = "/tmp/ckpt_open_XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

std::vector<ChunkPayload> one_chunk(const float* data) {
  return {
      {{"model.w", "model", DType::kF32, {2}, {0}, {2}, 0, 8, ""}, reinterpret_cast<const uint8_t*>(data)}};
}

TEST(OpenTensorFile, SniffsSafetensors) {
  const std::string dir = temp_dir();
  const float w[2] = {1, 2};
  ASSERT_TRUE(write_safetensors_file(dir + "/x.bin", one_chunk(w), {}).is_ok());
  auto r = open_tensor_file(dir + "/x.bin");  // extension says nothing
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "safetensors");
}

#ifdef CKPTCHECK_WITH_HDF5
TEST(OpenTensorFile, SniffsHdf5) {
  const std::string dir = temp_dir();
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
  const std::string path = temp_dir() + "/junk";
  ASSERT_TRUE(write_file_atomically(path, "GGUF\x03junk").is_ok());
  auto r = open_tensor_file(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(r.status().message().find("4747554603"), std::string::npos) << r.status().to_string();
}

TEST(OpenTensorFile, NativeMagicGoesToTheNativeReader) {
  const std::string path = temp_dir() + "/s.cks";
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
  const std::string path = temp_dir() + "/t";
  ASSERT_TRUE(write_file_atomically(path, "TST!payload").is_ok());
  auto r = open_tensor_file(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ((*r)->format_name(), "test");
}

}  // namespace
}  // namespace ckpt
