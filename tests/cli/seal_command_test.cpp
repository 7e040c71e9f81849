// `ckptcheck seal` and `verify` of a sealed torch.save checkpoint, as a user runs them: exit codes,
// the one-line errors and --json. Runs build/ckptcheck; skipped when the binary is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

const std::string kPytorchDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/";

class SealCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
    dir_ = root_ / "checkpoint-7";
    std::filesystem::create_directories(dir_);
    std::filesystem::copy_file(kPytorchDir + "model_state.pt", dir_ + "/pytorch_model.bin");
    std::filesystem::copy_file(kPytorchDir + "adamw_state.pt", dir_ + "/optimizer.pt");
  }
  TempDir root_;
  std::string dir_;
};

TEST_F(SealCommandTest, SealThenVerifyPassesAndASecondSealIsAUsageError) {
  CommandResult r = run_ckptcheck("seal --json '" + dir_ + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["files"], 2);
  EXPECT_GT(j["tensors"].get<int>(), 2);
  r = run_ckptcheck("verify --weights-only '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("PASS ", 0), 0u) << r.output;
  r = run_ckptcheck("seal '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("never replaced"), std::string::npos) << r.output;
}

TEST_F(SealCommandTest, FlippedByteExitsOneNamingFileTensorAndOffset) {
  ASSERT_EQ(run_ckptcheck("seal '" + dir_ + "'").exit_code, 0);
  // A byte inside the first tensor payload the seal recorded for the file.
  auto bytes = read_file_bytes(dir_ + "/pytorch_model.bin");
  const auto seal_bytes = read_file_bytes(dir_ + "/ckptcheck.seal.json");
  const auto seal = nlohmann::json::parse(seal_bytes.begin(), seal_bytes.end());
  nlohmann::json target;
  for (const auto& f : seal["files"])
    if (f["path"] == "pytorch_model.bin") target = f["tensors"][0];
  ASSERT_FALSE(target.is_null());
  const uint64_t offset = target["offset"].get<uint64_t>() + 2;
  bytes[offset] ^= 0x01;
  write_file_bytes(dir_ + "/pytorch_model.bin", bytes);

  CommandResult r = run_ckptcheck("verify --weights-only '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string name = target["name"];
  EXPECT_NE(r.output.find("[seal_tensor_sha256_mismatch] pytorch_model.bin " + name + ": "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("@" + std::to_string(target["offset"].get<uint64_t>()) + ".."), std::string::npos)
      << r.output;
  r = run_ckptcheck("verify --json --weights-only '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 1);
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["ok"], false);
  bool found = false;
  for (const auto& e : j["errors"])
    found = found || (e["code"] == "seal_tensor_sha256_mismatch" && e["tensor"] == name);
  EXPECT_TRUE(found) << r.output;
}

TEST_F(SealCommandTest, SignedSealNeedsItsSignatureUnderPubkey) {
  ASSERT_TRUE(write_ed25519_key_pair(root_ / "k.pem", root_ / "k.pub").is_ok());
  ASSERT_EQ(run_ckptcheck("seal '" + dir_ + "'").exit_code, 0);
  EXPECT_EQ(
      run_ckptcheck("verify --weights-only --pubkey '" + root_ / "k.pub" + "' '" + dir_ + "'").exit_code, 1);
  CommandResult r = run_ckptcheck("sign '" + dir_ + "' --key '" + root_ / "k.pem" + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ckptcheck.seal.json.sig"), std::string::npos) << r.output;
  r = run_ckptcheck("verify --weights-only --pubkey '" + root_ / "k.pub" + "' '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(SealCommandTest, UnsealedFileGetsStructuralChecksAndSaysHowToSeal) {
  // An unsealed file is verified as a foreign checkpoint (verifier/check/foreign_verifier.h):
  // structural checks only, with a not_sealed warning saying how to seal it.
  const CommandResult r = run_ckptcheck("verify '" + dir_ + "/optimizer.pt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;  // an optimizer state dict: structurally whole
  EXPECT_NE(r.output.find("not_sealed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ckptcheck seal"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
