// The CLI around the verifier: exit codes, --json, --all, sign + --pubkey. Runs build/ckptcheck;
// skipped when the binary is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "tests/support/test_paths.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class VerifyCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
    dir_ = save_training_state(root_.path(), full_training_state());
  }
  TempDir root_;
  std::string dir_;
};

TEST_F(VerifyCommandTest, CleanCheckpointExitsZeroWithVerdictFirst) {
  const CommandResult r = run_ckptcheck("verify '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("PASS ", 0), 0u) << r.output;
}

TEST_F(VerifyCommandTest, RootResolvesToLatest) {
  const CommandResult r = run_ckptcheck("verify --json '" + root_.path() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["path"], dir_);
}

TEST_F(VerifyCommandTest, DamagedCheckpointExitsOneAndJsonNamesTheCode) {
  edit_manifest(dir_, [](Manifest& m) { m.shards[0].sha256 = std::string(64, 'b'); });
  const CommandResult r = run_ckptcheck("verify --json --jobs 2 '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["errors"][0]["code"], "shard_sha256_mismatch");
  EXPECT_EQ(j["step"], kFixtureStep);
}

TEST_F(VerifyCommandTest, QuickSkipsHashing) {
  edit_manifest(dir_, [](Manifest& m) { m.shards[0].sha256 = std::string(64, 'b'); });
  const CommandResult r = run_ckptcheck("verify --quick --json '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["bytes_hashed"], 0);
}

TEST_F(VerifyCommandTest, MissingPathOrBadFlagExitsTwo) {
  EXPECT_EQ(run_ckptcheck("verify '" + root_.path() + "/nope'").exit_code, 2);
  EXPECT_EQ(run_ckptcheck("verify --jobs 0 '" + dir_ + "'").exit_code, 2);
  TempDir empty;
  EXPECT_EQ(run_ckptcheck("verify '" + empty.path() + "'").exit_code, 2);
}

TEST_F(VerifyCommandTest, AllListsEveryCheckpointAndUncommittedLeftovers) {
  save_training_state(root_.path(), full_training_state(30, 2), 30);
  ASSERT_TRUE(make_directory(root_ / ".tmp-step_00000040-7").is_ok());
  const CommandResult r = run_ckptcheck("verify --all --json '" + root_.path() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["checkpoints"].size(), 2u);
  EXPECT_EQ(j["uncommitted"].size(), 1u);
}

TEST_F(VerifyCommandTest, SignThenVerifyWithPubkey) {
  TempDir keys;
  ASSERT_TRUE(write_ed25519_key_pair(keys / "k.pem", keys / "k.pub").is_ok());
  EXPECT_EQ(run_ckptcheck("verify --pubkey '" + keys / "k.pub" + "' '" + dir_ + "'").exit_code, 1);
  const CommandResult sign = run_ckptcheck("sign '" + dir_ + "' --key '" + keys / "k.pem" + "'");
  ASSERT_EQ(sign.exit_code, 0) << sign.output;
  const CommandResult r = run_ckptcheck("verify --json --pubkey '" + keys / "k.pub" + "' '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(nlohmann::json::parse(r.output)["warnings"].empty());
  EXPECT_EQ(run_ckptcheck("verify --pubkey '" + keys / "absent.pub" + "' '" + dir_ + "'").exit_code, 2);
}

}  // namespace
}  // namespace ckpt
