// The drill and the launcher under a real Slurm (two slurmd nodes on this machine, started by the
// slurm_cluster ctest fixture): every run a job step, the kill a `scancel --signal=KILL` of the
// step, a 2-node run resumed on 1 node (train_ddp.py, and a program keeping rank_<r>.pt), the example's
// two resume bugs caught, the example sbatch
// script's drill inside its allocation, and an allocation that cannot be granted reported instead of waited
// for. After every drill no process of it is left and no job of it is still queued.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/support/process_scan.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built";
    ASSERT_TRUE(slurm_cluster_is_up());
  }
  void TearDown() override {
    const auto left = processes_whose_environment_contains(work_.path());
    EXPECT_TRUE(left.empty()) << "a rank outlived the drill: " << left.front();
    // A job whose srun just returned may still be listed while Slurm completes it (state CG).
    CommandResult queue;
    for (int i = 0; i < 100; ++i) {
      queue = run_command("squeue --noheader --format='%i %j %T' 2>&1");
      if (queue.output.find("ckptcheck") == std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(queue.output.find("ckptcheck"), std::string::npos) << "still queued:\n" << queue.output;
    EXPECT_TRUE(no_slurm_node_drained());
  }
  std::string drill_command(const std::string& options, const std::string& program_args = "") const {
    return std::string(CKPTCHECK_BIN) + " drill --launcher slurm --save-at 4 --resume-steps 4 --work-dir " +
           work_.path() + " " + options + " -- /usr/bin/python3 " + CKPTCHECK_SOURCE_DIR +
           "/examples/pytorch/train_ddp.py " + program_args;
  }
  CommandResult drill(const std::string& options, const std::string& program_args = "") const {
    return run_command(drill_command(options, program_args) + " 2>&1");
  }
  TempDir work_;
};

TEST_F(Slurm, TwoNodeDrillKillsTheStepThroughSlurmAndResumesBitForBit) {
  const CommandResult r = drill("--nodes 2 --ntasks-per-node 1 --kill both");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("through Slurm (job "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("allocated by the drill"), std::string::npos) << r.output;
  // Both kills name the step scancel killed: the subject ran as a Slurm step, not a local process.
  const size_t first = r.output.find("killed by signal 9 (Killed) (Slurm step ");
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("killed by signal 9 (Killed) (Slurm step ", first + 1), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("PASS: resumed runs match the reference bit for bit"), std::string::npos)
      << r.output;
}

TEST_F(Slurm, TwoNodesResumedOnOneNodePassWithinTheMeasuredNoise) {
  const CommandResult r = drill("--nodes 2 --ntasks-per-node 1 --resume-nodes 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("subject and reference 2 rank(s), resumed 1 rank(s) through Slurm"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("control_envelope"), std::string::npos) << r.output;
}

TEST_F(Slurm, PerRankStateOfTwoNodesResumedOnOneIsJudgedByTheControlRun) {
  // A program whose per-rank state is rank_<r>.pt: rank 1's is absent on one node, as in the
  // uninterrupted control run there; a resumed run that lost rank 0's fails. Its steps after a save
  // take 0.25 s: without that the run ended before scancel's kill landed (exit 0, "did not die of
  // SIGKILL") on a machine where Slurm lists a step later than the program takes to finish.
  const std::string program =
      std::string(CKPTCHECK_BIN) + " drill --launcher slurm --save-at 4 --resume-steps 4 --work-dir " +
      work_.path() + " --nodes 2 --ntasks-per-node 1 --resume-nodes 1 -- /usr/bin/python3 " +
      CKPTCHECK_SOURCE_DIR + "/tests/data/programs/ranked_state_program.py --after-save-seconds 0.25";
  const CommandResult r = run_command(program + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed 1 rank(s) through Slurm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("absent-as-in-control rank_1 (absent at world size 1, as in an uninterrupted run)"),
            std::string::npos)
      << r.output;
  const CommandResult lost = run_command(program + " --bug lose-rank-state 2>&1");
  EXPECT_EQ(lost.exit_code, 1) << lost.output;
  EXPECT_NE(lost.output.find("FAIL: rank_0 diverged"), std::string::npos) << lost.output;
}

TEST_F(Slurm, EachResumeBugOfTheExampleFailsTheDrill) {
  for (const std::string bug : {"rank0-rng", "forget-optimizer"}) {
    const CommandResult r = drill("--nodes 2 --ntasks-per-node 1", "--bug " + bug);
    EXPECT_EQ(r.exit_code, 1) << bug << ":\n" << r.output;
    EXPECT_NE(r.output.find("FAIL: "), std::string::npos) << bug << ":\n" << r.output;
  }
}

TEST_F(Slurm, TheExampleSbatchScriptDrillsInsideItsOwnAllocation) {
  // examples/slurm/drill.sbatch as the README gives it, with two ranks per node; the drill runs its
  // steps in the batch job's allocation instead of taking one.
  const std::string log = work_ / "sbatch.out";
  const CommandResult r = run_command("cd " + std::string(CKPTCHECK_SOURCE_DIR) +
                                      " && sbatch --wait --nodes=2 --ntasks-per-node=2 --output=" + log +
                                      " --export=ALL,CKPTCHECK=" + CKPTCHECK_BIN +
                                      ",WORK_DIR=" + work_.path() + ",REPORT_DIR=" + work_.path() +
                                      "/report,SAVE_AT=4,KILL=after-save examples/slurm/drill.sbatch 2>&1");
  const std::string out = read_text_file(log);
  ASSERT_EQ(r.exit_code, 0) << r.output << out;
  EXPECT_NE(out.find("subject and reference 4 rank(s), resumed 4 rank(s) through Slurm (job "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("allocated by the drill"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS: "), std::string::npos) << out;
  EXPECT_EQ(::access((work_.path() + "/report/report.json").c_str(), R_OK), 0) << out;
}

TEST_F(Slurm, AnAllocationThatStaysPendingIsAClearErrorNotAHang) {
  // 64 tasks on a node of this machine's CPUs, without --overcommit: Slurm queues it for ever.
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = drill("--nodes 2 --slurm-args --ntasks-per-node=64 --slurm-start-timeout 3");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("salloc --nodes=2 gave no allocation within 3 s"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 120) << "the drill waited for a pending allocation";
}

TEST_F(Slurm, LaunchUnderSrunGivesEveryTaskTorchrunsVariablesFromSlurms) {
  const CommandResult r =
      run_command("srun --nodes=2 --ntasks-per-node=2 --overcommit --job-name=ckptcheck-launch-test " +
                  std::string(CKPTCHECK_BIN) +
                  " launch -- sh -c 'env | grep -E "
                  "\"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|"
                  "MASTER_PORT)=\" | sort > " +
                  work_.path() + "/rank-$RANK' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string port;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string env = read_text_file(work_ / ("rank-" + std::to_string(rank)));
    ASSERT_FALSE(env.empty()) << "rank " << rank << " wrote nothing";
    EXPECT_NE(env.find("WORLD_SIZE=4\n"), std::string::npos) << env;
    EXPECT_NE(env.find("LOCAL_WORLD_SIZE=2\n"), std::string::npos) << env;
    // n1 is no DNS name: its address is the NodeAddr Slurm resolves it to.
    EXPECT_NE(env.find("MASTER_ADDR=127.0.0.1\n"), std::string::npos) << env;
    const size_t at = env.find("MASTER_PORT=");
    ASSERT_NE(at, std::string::npos) << env;
    const std::string this_port = env.substr(at, env.find('\n', at) - at);
    if (rank == 0) port = this_port;
    EXPECT_EQ(this_port, port) << "every task must meet on one port";
  }
  const std::string last = read_text_file(work_ / "rank-3");
  EXPECT_NE(last.find("GROUP_RANK=1\n"), std::string::npos) << last;
}

}  // namespace
}  // namespace ckpt
