#include "formats/pytorch_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/sha256.h"
#include "tests/support/byte_mutations.h"
#include "tests/support/pickle_ops.h"
#include "tests/support/zip_builder.h"

namespace ckpt {
namespace {

using namespace pk;

const std::string kDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/";

nlohmann::json expected() {
  auto text = read_small_file(kDir + "expected.json", 1 << 20);
  EXPECT_TRUE(text.is_ok());
  auto j = parse_json(*text, "expected.json");
  EXPECT_TRUE(j.is_ok());
  return *j;
}

TEST(PytorchFile, FixturesMatchWhatTorchSaved) {
  const nlohmann::json want = expected();
  ASSERT_GE(want["files"].size(), 2u);
  for (const auto& [file, tensors] : want["files"].items()) {
    auto r = open_pytorch_file(kDir + file);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const auto& chunks = (*r)->chunks();
    ASSERT_EQ(chunks.size(), tensors.size()) << file;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const ChunkInfo& c = chunks[i];
      EXPECT_EQ(c.name, tensors[i]["name"].get<std::string>()) << file;
      EXPECT_EQ(dtype_name(c.dtype), tensors[i]["dtype"].get<std::string>()) << c.name;
      EXPECT_EQ(c.shape, tensors[i]["shape"].get<std::vector<int64_t>>()) << c.name;
      EXPECT_EQ(c.sha256, "");
      std::vector<uint8_t> bytes(c.data_bytes);
      ASSERT_TRUE((*r)->read_chunk(i, 0, bytes.data(), bytes.size()).is_ok());
      EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()), tensors[i]["sha256"].get<std::string>()) << c.name;
    }
  }
}

TEST(PytorchFile, OptimizerStateFlattensWithMetadata) {
  auto r = open_pytorch_file(kDir + "adamw_state.pt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->chunks()[1].name, "state.0.exp_avg");
  EXPECT_EQ((*r)->chunks()[1].component, "optimizer");
  const auto& groups = (*r)->metadata()["param_groups"];
  ASSERT_TRUE(groups.is_array());
  EXPECT_DOUBLE_EQ(groups[0]["lr"].get<double>(), 1e-3);
  EXPECT_EQ(groups[0]["params"].size(), 4u);
}

TEST(PytorchFile, MaliciousFixturesAreRefusedNamingTheGlobal) {
  ::unlink("/tmp/ckptcheck_fixture_was_executed");
  const nlohmann::json want = expected();
  ASSERT_EQ(want["malicious"].size(), 2u);
  for (const auto& [file, global] : want["malicious"].items()) {
    auto r = open_pytorch_file(kDir + file);
    ASSERT_FALSE(r.is_ok()) << file;
    EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
    EXPECT_NE(r.status().message().find("refusing pickle global '" + global.get<std::string>() + "'"),
              std::string::npos)
        << r.status().to_string();
  }
  EXPECT_FALSE(path_exists("/tmp/ckptcheck_fixture_was_executed"));
}

// A torch.save-shaped zip around a pickle holding one 2x2 F32 tensor 'w' over storage "0".
std::vector<uint8_t> torch_zip(const std::string& tensor_ops, const std::string& storage_bytes,
                               const std::string& byteorder = "little", uint16_t method = 0) {
  const std::string pkl = proto() + empty_dict() + mark() + str("w") + tensor_ops + setitems() + stop();
  return build_zip({{"arch/data.pkl", pkl}, {"arch/byteorder", byteorder}, {"arch/data/0", storage_bytes}},
                   {false, method});
}

Result<std::unique_ptr<TensorFile>> open_bytes(std::vector<uint8_t> b) {
  return open_pytorch(std::make_unique<MemoryByteSource>(std::move(b), "m.pt"));
}

void expect_error(std::vector<uint8_t> b, StatusCode code, const std::string& needle) {
  auto r = open_bytes(std::move(b));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("m.pt"), std::string::npos) << r.status().to_string();
}

TEST(PytorchFile, StorageOffsetViewPointsIntoTheEntry) {
  std::string storage(24, '\0');
  for (int i = 0; i < 24; ++i) storage[i] = static_cast<char>(i);
  auto b = torch_zip(tensor2d(pk::storage("FloatStorage", "0", 6), 2, 2, 2, 2, 1), storage);
  auto r = open_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::vector<uint8_t> got(16);
  ASSERT_TRUE((*r)->read_chunk(0, 0, got.data(), got.size()).is_ok());
  EXPECT_EQ(got[0], 8);  // element 2 of the storage
  EXPECT_EQ(got[15], 23);
}

TEST(PytorchDefects, CompressedEntry) {
  expect_error(
      torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0), "little", 8),
      StatusCode::kNotSupported, "compression method 8");
}

TEST(PytorchDefects, NoDataPkl) {
  expect_error(build_zip({{"arch/other", "x"}}), StatusCode::kNotSupported, "no <archive>/data.pkl");
}

TEST(PytorchDefects, BigEndian) {
  expect_error(torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0), "big"),
               StatusCode::kNotSupported, "byteorder 'big'");
}

TEST(PytorchDefects, MissingStorageEntry) {
  expect_error(torch_zip(tensor2d(storage("FloatStorage", "9", 4), 0, 2, 2, 2, 1), std::string(16, 0)),
               StatusCode::kCorruption, "tensor 'w': storage entry 'arch/data/9' is missing");
}

TEST(PytorchDefects, StorageSizeMismatch) {
  expect_error(torch_zip(tensor2d(storage("DoubleStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0)),
               StatusCode::kCorruption, "should hold 4 F64 elements, entry has 16 bytes");
}

TEST(PytorchDefects, NonContiguousView) {
  expect_error(torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 1, 2), std::string(16, 0)),
               StatusCode::kNotSupported, "tensor 'w': non-contiguous layout");
}

TEST(PytorchDefects, ViewPastStorage) {
  expect_error(torch_zip(tensor2d(storage("FloatStorage", "0", 4), 1, 2, 2, 2, 1), std::string(16, 0)),
               StatusCode::kCorruption, "exceeds the storage's 4 elements");
}

TEST(PytorchDefects, ForbiddenGlobalInsideZip) {
  expect_error(torch_zip(global("os", "system") + str("x") + "\x85" + reduce(), std::string(16, 0)),
               StatusCode::kNotSupported, "refusing pickle global 'os.system'");
}

TEST(PytorchFile, MutationsNeverCrash) {
  std::ifstream f(kDir + "model_state.pt", std::ios::binary);
  const std::vector<uint8_t> valid(std::istreambuf_iterator<char>(f), {});
  ASSERT_GT(valid.size(), 1000u);
  std::mt19937_64 rng(99);
  int opened = 0;
  for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
    auto r = open_bytes(mutate(valid, rng));
    if (!r.is_ok()) continue;
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      std::vector<uint8_t> buf((*r)->chunks()[c].data_bytes);
      EXPECT_TRUE((*r)->read_chunk(c, 0, buf.data(), buf.size()).is_ok());
    }
    (void)(*r)->metadata().dump();
  }
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace ckpt
