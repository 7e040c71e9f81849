// `ckptcheck seal` and `verify` of a sealed torch.save checkpoint, as a user runs them: exit codes,
// the one-line errors and --json. Runs build/ckptcheck; skipped when the binary is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
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

const std::string kMegatronDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/megatron_torch_dist";

std::string seal_text(const std::string& dir) {
  const auto bytes = read_file_bytes(dir + "/ckptcheck.seal.json");
  return std::string(bytes.begin(), bytes.end());
}

TEST_F(SealCommandTest, SealsOfTheSameBytesAreIdenticalWhereverTheyLieAndTravel) {
  // A Megatron directory: its metadata.json is no tensor file, so its seal carries a note about it.
  const std::string a = root_ / "a/iter_0000010", b = root_ / "b/deeper/iter_0000010", c = root_ / "c";
  for (const std::string& to : {a, b}) {
    std::filesystem::create_directories(std::filesystem::path(to).parent_path());
    std::filesystem::copy(kMegatronDir, to, std::filesystem::copy_options::recursive);
  }
  ASSERT_EQ(std::system(("cp -a '" + a + "' '" + c + "'").c_str()), 0);
  for (const std::string& dir : {a, b, c}) ASSERT_EQ(run_ckptcheck("seal '" + dir + "'").exit_code, 0) << dir;
  const std::string sealed = seal_text(a);
  EXPECT_EQ(seal_text(b), sealed);
  EXPECT_EQ(seal_text(c), sealed);
  EXPECT_EQ(sealed.find(root_.path()), std::string::npos) << "a machine's path in the seal: " << sealed;
  EXPECT_NE(sealed.find("\"tensors_unread\": \"metadata.json: "), std::string::npos) << sealed;
  // Moved elsewhere, the sealed copy still verifies.
  const std::string moved = root_ / "elsewhere/renamed";
  std::filesystem::create_directories(root_ / "elsewhere");
  std::filesystem::rename(a, moved);
  const CommandResult r = run_ckptcheck("verify '" + moved + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS " + moved), std::string::npos) << r.output;
}

TEST_F(SealCommandTest, ADcpDirectoryBelowASealedFolderIsSealedItemByItem) {
  const std::string run = root_ / "run", nested = run + "/checkpoints/iter_0000010";
  std::filesystem::create_directories(run + "/checkpoints");
  std::filesystem::copy(kMegatronDir, nested, std::filesystem::copy_options::recursive);
  TempDir notes;
  std::filesystem::copy_file(notes.write("notes.txt", "lr 3e-4\n"), run + "/notes.txt");
  CommandResult r = run_ckptcheck("seal --json '" + run + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("ZIP64"), std::string::npos) << "a .distcp sniffed as one zip: " << r.output;
  const auto seal = nlohmann::json::parse(seal_text(run));
  nlohmann::json distcp;
  for (const auto& f : seal["files"]) {
    if (f["path"] == "checkpoints/iter_0000010/__0_0.distcp") distcp = f;
  }
  ASSERT_TRUE(distcp.is_object()) << seal.dump();
  EXPECT_EQ(distcp["format"], "dcp") << distcp.dump();
  EXPECT_FALSE(distcp.contains("tensors_unread")) << distcp.dump();
  ASSERT_FALSE(distcp["tensors"].empty()) << distcp.dump();
  r = run_ckptcheck("verify '" + run + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // A flipped byte inside one item is named by the nested file and the item.
  const auto& item = distcp["tensors"][0];
  auto bytes = read_file_bytes(nested + "/__0_0.distcp");
  bytes[item["offset"].get<size_t>() + item["bytes"].get<size_t>() / 2] ^= 0x10;
  write_file_bytes(nested + "/__0_0.distcp", bytes);
  r = run_ckptcheck("verify '" + run + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[seal_tensor_sha256_mismatch] checkpoints/iter_0000010/__0_0.distcp"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ckpt
