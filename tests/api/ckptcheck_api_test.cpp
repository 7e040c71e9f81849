// The public torch-free API (<ckptcheck/ckptcheck.h>) as an embedding program uses it: list a
// PyTorch-written file's tensors, seal it, verify it, damage it. The LibTorch half and the installed
// package are tested end to end by tests/install/install_embed_drill_test.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/ckptcheck.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace {

const std::string kPytorchDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/";

TEST(PublicApi, ListsTheTensorsOfATorchSaveFileWithoutRunningIt) {
  auto tensors = ckptcheck::list_tensors(kPytorchDir + "model_state.pt");
  ASSERT_TRUE(tensors.ok()) << tensors.status().message();
  ASSERT_FALSE(tensors.value().empty());
  for (const auto& t : tensors.value()) {
    EXPECT_FALSE(t.name.empty());
    EXPECT_FALSE(t.dtype.empty());
    EXPECT_GE(t.chunks, 1u);
  }
  auto missing = ckptcheck::list_tensors(kPytorchDir + "no-such-file.pt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().exit_code(), 2);
  EXPECT_NE(missing.status().message().find("no-such-file.pt"), std::string::npos);
}

TEST(PublicApi, SealThenVerifyCatchesAFlippedTensorByte) {
  ckpt::testing::TempDir dir;
  const std::string file = dir / "model.pt";
  std::filesystem::copy_file(kPytorchDir + "model_state.pt", file);
  auto sealed = ckptcheck::seal(file);
  ASSERT_TRUE(sealed.ok()) << sealed.status().message();
  EXPECT_EQ(sealed.value().files, 1u);
  EXPECT_GT(sealed.value().tensors, 0u);
  ckptcheck::VerifyOptions weights;
  weights.weights_only = true;  // model_state.pt holds model weights alone
  auto clean = ckptcheck::verify(file, weights);
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  EXPECT_TRUE(clean.value().ok) << clean.value().json;

  auto again = ckptcheck::seal(file);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().exit_code(), 2);

  // The public listing has no file offsets; the seal records them: flip its first tensor's byte.
  const auto seal_bytes = ckpt::testing::read_file_bytes(sealed.value().seal_path);
  const auto j = nlohmann::json::parse(seal_bytes.begin(), seal_bytes.end());
  const uint64_t offset = j["files"][0]["tensors"][0]["offset"].get<uint64_t>();
  auto bytes = ckpt::testing::read_file_bytes(file);
  bytes[offset] ^= 0x10;
  ckpt::testing::write_file_bytes(file, bytes);
  auto damaged = ckptcheck::verify(file);
  ASSERT_TRUE(damaged.ok()) << damaged.status().message();
  EXPECT_FALSE(damaged.value().ok);
  bool named = false;
  for (const auto& e : damaged.value().errors)
    named =
        named || (e.code == "seal_tensor_sha256_mismatch" && e.tensor == j["files"][0]["tensors"][0]["name"]);
  EXPECT_TRUE(named) << damaged.value().json;
}

}  // namespace

namespace {

TEST(PublicApi, InspectAndDiffAreTheCommandsEngines) {
  const std::string tied = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/gate/tied_weights.bin";
  auto inspected = ckptcheck::inspect(tied);
  ASSERT_TRUE(inspected.ok()) << inspected.status().message();
  EXPECT_TRUE(inspected.value().ok);
  EXPECT_NE(inspected.value().json.find("\"alias_of\":\"embed.weight\""), std::string::npos)
      << inspected.value().json;
  EXPECT_NE(inspected.value().text.find("alias of embed.weight"), std::string::npos)
      << inspected.value().text;
  ckptcheck::InspectOptions one;
  one.tensor = "lm_head.weigth";
  auto unknown = ckptcheck::inspect(tied, one);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().exit_code(), 2);
  EXPECT_NE(unknown.status().message().find("did you mean: lm_head.weight"), std::string::npos)
      << unknown.status().message();

  auto same = ckptcheck::diff(tied, tied);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_TRUE(same.value().identical);
  const std::string other = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/gate/pre04_tensors.pt";
  auto different = ckptcheck::diff(tied, other);
  ASSERT_TRUE(different.ok()) << different.status().message();
  EXPECT_FALSE(different.value().identical);
  EXPECT_NE(different.value().text.find("only in A"), std::string::npos) << different.value().text;
}

}  // namespace
