// The drill of a user's own program on several ranks (examples/pytorch/train_ddp.py, DDP over
// gloo): started by the drill's own launcher (--nproc-per-node), resumed on another world size,
// and started by an outside launcher given as the command. Both of the example's resume bugs must
// fail the drill, and no rank may outlive a drill.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/process_scan.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class DrillRanks : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built"; }
  void TearDown() override {
    EXPECT_TRUE(processes_whose_environment_contains(work_.path()).empty())
        << "a rank outlived the drill: " << processes_whose_environment_contains(work_.path())[0];
  }
  CommandResult drill(const std::string& options, const std::string& program_args = "") {
    return run_ckptcheck("drill --save-at 4 --resume-steps 4 --work-dir " + work_.path() + " " + options +
                         " -- /usr/bin/python3 " + example_ + " " + program_args + " 2>&1");
  }
  const std::string example_ = std::string(CKPTCHECK_SOURCE_DIR) + "/examples/pytorch/train_ddp.py";
  TempDir work_;
};

TEST_F(DrillRanks, TwoRanksOfAUserProgramResumeBitForBitForBothKills) {
  const CommandResult r = drill("--nproc-per-node 2 --kill both");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("subject and reference 2 rank(s), resumed 2 rank(s)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("PASS: resumed runs match the reference bit for bit"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("subject_killed               during-save"), std::string::npos) << r.output;
}

TEST_F(DrillRanks, ResumingOnOneRankPassesWithinTheMeasuredNoise) {
  const CommandResult r = drill("--nproc-per-node 2 --resume-nproc 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed 1 rank(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("control_envelope"), std::string::npos) << r.output;
}

TEST_F(DrillRanks, EveryRankRestoringRankZerosRngFails) {
  const CommandResult r = drill("--nproc-per-node 2", "--bug rank0-rng");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("diverged"), std::string::npos) << r.output;
}

TEST_F(DrillRanks, ForgettingTheOptimizerOnResumeFails) {
  const CommandResult r = drill("--nproc-per-node 2", "--bug forget-optimizer");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("diverged"), std::string::npos) << r.output;
}

TEST_F(DrillRanks, AnOutsideLauncherGivenAsTheCommandWorksToo) {
  const CommandResult r =
      run_ckptcheck("drill --save-at 4 --resume-steps 4 --work-dir " + work_.path() + " -- " + CKPTCHECK_BIN +
                    " launch --nproc-per-node 2 -- /usr/bin/python3 " + example_ + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bit for bit"), std::string::npos) << r.output;
}

TEST_F(DrillRanks, TheProgramAfterDashDashIsNeverParsedAsTheDrillsOptions) {
  // A list option just before `--`, and a launcher with a `--` of its own in the program: the
  // program's arguments stay the program's (the run fails in the program, not in option parsing).
  const CommandResult r =
      run_ckptcheck("drill --save-at 4 --work-dir " + work_.path() + " --faults truncate -- " +
                    CKPTCHECK_BIN + " launch --nproc-per-node 1 -- /bin/false --resume-steps 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("not expected"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("never reached its kill point"), std::string::npos) << r.output;
  const CommandResult verify = run_ckptcheck("verify " + work_.path() + " -- /bin/true 2>&1");
  EXPECT_EQ(verify.exit_code, 2) << verify.output;
  EXPECT_NE(verify.output.find("ckptcheck verify: takes no program after --"), std::string::npos)
      << verify.output;
}

TEST_F(DrillRanks, SlurmOptionsWithoutTheSlurmLauncherAreAUsageError) {
  const CommandResult r = drill("--nodes 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--nodes, --resume-nodes and --slurm-args need --launcher slurm"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ckpt
