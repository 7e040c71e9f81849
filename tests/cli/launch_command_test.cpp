// `ckptcheck launch` of programs that are not ckptcheck: a program found in PATH gets torchrun's
// environment on every rank (what Debian's crashing torchrun would have set), node 1 of 2 numbers
// its ranks after node 0's, and a ckptcheck subcommand still runs this binary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class LaunchCommand : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built"; }
  // Each rank writes its torchrun variables to OUT/rank-$RANK.
  std::string dump_env_command() const {
    return "sh -c 'env | grep -E \"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|ROLE_RANK|"
           "ROLE_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|OMP_NUM_THREADS)=\" | sort > " +
           out_.path() + "/rank-$RANK'";
  }
  TempDir out_;
};

TEST_F(LaunchCommand, AProgramFromPathGetsTorchrunsEnvironmentOnEveryRank) {
  const CommandResult r = run_command("env -u OMP_NUM_THREADS '" + std::string(CKPTCHECK_BIN) +
                                      "' launch --nproc-per-node 2 -- " + dump_env_command() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank : {0, 1}) {
    const std::string env = read_text_file(out_ / ("rank-" + std::to_string(rank)));
    EXPECT_NE(env.find("RANK=" + std::to_string(rank) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("LOCAL_RANK=" + std::to_string(rank) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("WORLD_SIZE=2\n"), std::string::npos) << env;
    EXPECT_NE(env.find("LOCAL_WORLD_SIZE=2\n"), std::string::npos) << env;
    EXPECT_NE(env.find("GROUP_RANK=0\n"), std::string::npos) << env;
    EXPECT_NE(env.find("MASTER_ADDR=127.0.0.1\n"), std::string::npos) << env;
    EXPECT_NE(env.find("OMP_NUM_THREADS=1\n"), std::string::npos) << env;
  }
}

TEST_F(LaunchCommand, NodeOneOfTwoNumbersItsRanksAfterNodeZero) {
  const CommandResult r =
      run_command("'" + std::string(CKPTCHECK_BIN) +
                  "' launch --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "
                  "29517 --nproc-per-node 2 -- " +
                  dump_env_command() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string env = read_text_file(out_ / "rank-3");
  EXPECT_NE(env.find("LOCAL_RANK=1\n"), std::string::npos) << env;
  EXPECT_NE(env.find("WORLD_SIZE=4\n"), std::string::npos) << env;
  EXPECT_NE(env.find("GROUP_RANK=1\n"), std::string::npos) << env;
  EXPECT_NE(env.find("MASTER_PORT=29517\n"), std::string::npos) << env;
  EXPECT_NE(r.output.find("rank 3: exit 0"), std::string::npos) << r.output;
}

TEST_F(LaunchCommand, UnknownProgramAndMissingPortAreUsageErrors) {
  CommandResult r = run_ckptcheck("launch --nproc-per-node 2 -- no-such-program-ckptcheck");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-program-ckptcheck: no such program in PATH"), std::string::npos)
      << r.output;
  r = run_ckptcheck("launch --nnodes 2 --node-rank 0 --nproc-per-node 1 -- true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("master_port"), std::string::npos) << r.output;
  // A ckptcheck subcommand still runs this binary on every rank.
  r = run_ckptcheck("launch --nproc-per-node 2 -- plan --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace ckpt
