// `verify` recognises the training state a resume needs by its structure, wherever it sits, on
// files Debian's PyTorch wrote (scripts/make_pytorch_fixtures.py --only resume_state): a checkpoint
// saved as {"model", "opt", "sched", "scaler", "rng", "step"} passes without --weights-only, and
// the advice for one that lacks its optimizer never suggests switching the check off when the file
// was evidently saved to be resumed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

const std::string kResumeTorchFiles = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch";
const std::string kResumeStateFiles = kResumeTorchFiles + "/resume_state";

class VerifyResumeStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
  static nlohmann::json json_of(const CommandResult& r) {
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.output;
    return j;
  }
  static bool found(const nlohmann::json& report, const std::string& part, const std::string& where) {
    for (const auto& f : report["resume_state"]) {
      if (f["part"] == part && f["where"] == where) return true;
    }
    return false;
  }
};

TEST_F(VerifyResumeStateTest, StateUnderNamesOfTheUsersChoicePasses) {
  const CommandResult r = run_ckptcheck("verify --json '" + kResumeStateFiles + "/renamed_keys.pt'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_TRUE(j["errors"].empty()) << r.output;
  EXPECT_TRUE(found(j, "optimizer", "opt")) << r.output;
  EXPECT_TRUE(found(j, "scheduler", "sched")) << r.output;
  EXPECT_TRUE(found(j, "scaler", "scaler")) << r.output;
  EXPECT_TRUE(found(j, "rng", "rng.torch")) << r.output;   // torch.get_rng_state()'s ByteTensor
  EXPECT_TRUE(found(j, "rng", "rng.python")) << r.output;  // random.getstate()
  EXPECT_TRUE(found(j, "step", "step")) << r.output;
  // The summary says where each part was found.
  const CommandResult text = run_ckptcheck("verify '" + kResumeStateFiles + "/renamed_keys.pt'");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find(
                "\nresume state: optimizer at 'opt', scheduler at 'sched', scaler at 'scaler', rng at "),
            std::string::npos)
      << text.output;
}

TEST_F(VerifyResumeStateTest, NumpyRandomStateIsRecognised) {
  // numpy's array is outside torch.load(weights_only=True)'s allowlist: the gate still asks.
  CommandResult r = run_ckptcheck("verify --json '" + kResumeStateFiles + "/numpy_rng.pt'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run_ckptcheck(
      "verify --json --allow-global numpy.core.multiarray._reconstruct --allow-global numpy.ndarray "
      "--allow-global numpy.dtype '" +
      kResumeStateFiles + "/numpy_rng.pt'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(found(json_of(r), "rng", "rng.numpy")) << r.output;
}

TEST_F(VerifyResumeStateTest, HalfAnOptimizerIsNamedWithoutSuggestingWeightsOnly) {
  const CommandResult r = run_ckptcheck("verify '" + kResumeStateFiles + "/half_optimizer.pt'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[optimizer_state_missing]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the optimizer state dict at 'opt' lacks 'state' or 'param_groups'"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("--weights-only"), std::string::npos) << r.output;
}

TEST_F(VerifyResumeStateTest, AResumeCheckpointWithoutOptimizerSaysWhatItHolds) {
  const CommandResult r = run_ckptcheck("verify '" + kResumeStateFiles + "/sched_only.pt'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[optimizer_state_missing]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("it holds scheduler at 'sched', step at 'step'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--weights-only"), std::string::npos) << r.output;
  // A file of weights alone still gets the hint: it may be meant as weights only.
  const CommandResult weights = run_ckptcheck("verify '" + kResumeTorchFiles + "/model_state.pt'");
  EXPECT_EQ(weights.exit_code, 1) << weights.output;
  EXPECT_NE(weights.output.find("pass --weights-only if this holds only model weights"), std::string::npos)
      << weights.output;
}

TEST_F(VerifyResumeStateTest, AFolderWhoseStateSitsInAFileOfAnyNamePasses) {
  TempDir dir;
  fs::copy_file(kResumeTorchFiles + "/model_state.pt", dir / "pytorch_model.bin");
  fs::copy_file(kResumeStateFiles + "/renamed_keys.pt", dir / "training_state.pt");
  const CommandResult r = run_ckptcheck("verify --json '" + dir.path() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["kind"], "model_folder");
  EXPECT_TRUE(found(j, "optimizer", "training_state.pt: opt")) << r.output;
}

}  // namespace
}  // namespace ckpt
