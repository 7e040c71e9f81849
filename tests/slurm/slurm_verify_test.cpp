// verify --distributed under a real Slurm (two slurmd nodes on this machine, started by the
// slurm_cluster ctest fixture), launched both ways a site would: `srun --mpi=pmix` (Slurm wires up
// Open MPI directly) and Open MPI's mpirun inside a 2-node salloc (its daemons started through
// srun). One task per node; the tasks split the scan units and rank 0 prints the report. A 2-node
// verify equals the 1-node one byte for byte apart from the timing; a byte damaged in rank 1's
// share is reported by rank 0; a task killed mid-verify fails the run, never a PASS; srun without
// an MPI plugin is a usage error (exit 2), not Open MPI's abort with exit 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>

#include "tests/support/slurm_cluster.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

std::string without_seconds(const std::string& json) {
  return std::regex_replace(json, std::regex("\"seconds\":[0-9.eE+-]+"), "\"seconds\":0");
}

class SlurmVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built";
    ASSERT_TRUE(slurm_cluster_is_up());
    // Tensors of 1-3 MiB in 2 shards: the scan is cut into many units, so each task has a share.
    std::vector<LoadedTensor> state = full_training_state();
    for (int i = 0; i < 12; ++i)
      state.push_back(finite_f32_tensor("rng.big." + std::to_string(i), {256, 1024 * (1 + i % 3)}, 0.1f));
    dir_ = save_training_state(root_.path(), state, kFixtureStep, 2);
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    // salloc returns while Slurm may still list the job as completing for a moment.
    CommandResult queue;
    for (int i = 0; i < 100; ++i) {
      queue = run_command("squeue --noheader --format='%i %j' 2>&1");
      if (queue.output.find("ckptcheck") == std::string::npos) break;
      ::usleep(100 * 1000);
    }
    EXPECT_EQ(queue.output.find("ckptcheck"), std::string::npos) << "still queued:\n" << queue.output;
    EXPECT_TRUE(no_slurm_node_drained());
  }
  enum class Launcher { kSrun, kMpirunInSalloc };
  // `ckptcheck verify --distributed --json` on 2 nodes, one task each: stdout in out_, the rest in
  // err_. `kill_rank`: that task SIGKILLs itself after its scan (CKPTCHECK_TEST_KILL_RANK).
  int verify_on_two_nodes(Launcher launcher, int kill_rank = -1, const std::string& srun_mpi = "--mpi=pmix") {
    const std::string out = root_ / "out.json", err = root_ / "err.txt";
    const std::string verify = std::string(CKPTCHECK_BIN) + " verify --distributed --json --jobs 1 '" +
                               target() + "' > " + out + " 2> " + err;
    const std::string kill = kill_rank < 0 ? "" : std::to_string(kill_rank);
    std::string command = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
    if (launcher == Launcher::kSrun) {
      command += "CKPTCHECK_TEST_KILL_RANK=" + kill +
                 " srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1 " + srun_mpi +
                 " --immediate=60 --job-name=ckptcheck-verify-test " + verify;
    } else {
      command +=
          "salloc --nodes=2 --ntasks-per-node=1 --immediate=60 --job-name=ckptcheck-verify-test mpirun -n 2 "
          "--map-by node -x CKPTCHECK_TEST_KILL_RANK=" +
          kill + " " + verify;
    }
    const CommandResult r = run_command("(" + command + ")");
    out_ = read_text_file(out);
    err_ = read_text_file(err);
    return r.exit_code;
  }
  std::string verify_on_one_node() const {
    const CommandResult r =
        run_command(std::string(CKPTCHECK_BIN) + " verify --json --jobs 1 '" + target() + "' 2>/dev/null");
    return r.output;
  }
  const std::string& target() const { return other_.empty() ? dir_ : other_; }
  TempDir root_;
  std::string dir_, out_, err_;
  std::string other_;  // verified instead of dir_ when set
};

TEST_F(SlurmVerify, TwoNodesUnderSrunPrintTheOneNodeReportByteForByteApartFromTiming) {
  const std::string one = verify_on_one_node();
  ASSERT_NE(one.find("\"ok\":true"), std::string::npos) << one;
  ASSERT_EQ(verify_on_two_nodes(Launcher::kSrun), 0) << out_ << err_;
  EXPECT_EQ(without_seconds(out_), without_seconds(one)) << err_;
  // Each node scanned a share: rank 0 names both in its one line on stderr.
  EXPECT_NE(err_.find("verify --distributed: 2 tasks; rank 0 on n1: "), std::string::npos) << err_;
  EXPECT_NE(err_.find("rank 1 on n2: "), std::string::npos) << err_;
}

TEST_F(SlurmVerify, TwoNodesUnderMpirunInsideAnAllocationPrintTheSameReport) {
  const std::string one = verify_on_one_node();
  ASSERT_EQ(verify_on_two_nodes(Launcher::kMpirunInSalloc), 0) << out_ << err_;
  EXPECT_EQ(without_seconds(out_), without_seconds(one)) << err_;
  EXPECT_NE(err_.find("rank 0 on n1: "), std::string::npos) << err_;
  EXPECT_NE(err_.find("rank 1 on n2: "), std::string::npos) << err_;
}

TEST_F(SlurmVerify, SrunWithoutAnMpiPluginIsAUsageErrorNotAFailedCheckpoint) {
  // Without --kill-on-bad-exit, so the step's code is the tasks' own, not srun's SIGTERM of the
  // slower one.
  EXPECT_EQ(verify_on_two_nodes(Launcher::kSrun, -1, "--mpi=none --kill-on-bad-exit=0"), 2) << out_ << err_;
  // --json answers in JSON even so: a usage error (exit_code 2), never a report of the checkpoint.
  EXPECT_NE(out_.find("\"exit_code\":2"), std::string::npos) << out_;
  EXPECT_NE(out_.find("\"ok\":false"), std::string::npos) << out_;
  EXPECT_NE(err_.find("srun started without an MPI plugin"), std::string::npos) << err_;
  EXPECT_NE(err_.find("srun --mpi=pmix"), std::string::npos) << err_;
}

TEST_F(SlurmVerify, AByteFlippedInRankOnesShareIsReportedByRankZero) {
  // The split every task computes: find a unit of rank 1's share and a payload inside it.
  auto shares = plan_verify_shares(dir_, 2, 1);
  ASSERT_TRUE(shares.is_ok()) << shares.status().to_string();
  const Manifest manifest = read_fixture_manifest(dir_);
  std::string tensor, shard;
  uint64_t offset = 0;
  for (const ShareUnit& unit : *shares) {
    if (unit.task != 1 || !tensor.empty()) continue;
    for (const ManifestTensor& t : manifest.tensors) {
      for (const ManifestChunk& c : t.chunks) {
        if (dir_ + "/" + manifest.shards[c.shard].path == unit.path && c.data_bytes > 16 &&
            c.data_offset >= unit.begin && c.data_offset < unit.end && tensor.empty()) {
          tensor = t.name;
          shard = unit.path;
          offset = c.data_offset + c.data_bytes / 2;
        }
      }
    }
  }
  ASSERT_FALSE(tensor.empty()) << "rank 1 has no payload in its share";
  std::vector<uint8_t> bytes = read_file_bytes(shard);
  bytes[offset] ^= 0x01;
  write_file_bytes(shard, bytes);

  const std::string one = verify_on_one_node();
  EXPECT_EQ(verify_on_two_nodes(Launcher::kSrun), 1) << out_ << err_;
  EXPECT_EQ(without_seconds(out_), without_seconds(one)) << err_;
  const auto j = nlohmann::json::parse(out_, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out_ << err_;
  ASSERT_FALSE(j["errors"].empty()) << out_;
  EXPECT_EQ(j["errors"][0]["code"], "chunk_sha256_mismatch") << out_;
  EXPECT_EQ(j["errors"][0]["tensor"], tensor) << out_;
}

TEST_F(SlurmVerify, ATaskKilledMidVerifyFailsTheRun) {
  // Rank 1 SIGKILLs itself after scanning its share, before the gather (a test-only hook); the
  // launcher ends the other task and exits with neither 0 nor 1.
  for (Launcher launcher : {Launcher::kSrun, Launcher::kMpirunInSalloc}) {
    const int code = verify_on_two_nodes(launcher, 1);
    EXPECT_NE(code, 0) << out_ << err_;
    EXPECT_NE(code, 1) << "a dead task is not a verdict on the checkpoint\n" << out_ << err_;
    EXPECT_EQ(out_.find("\"ok\""), std::string::npos) << "a partial report was printed:\n" << out_;
    // srun: "n2: task 1: Killed"; mpirun: "process rank 1 ... on node n2 exited on signal 9".
    const bool named =
        err_.find("task 1: Killed") != std::string::npos || err_.find("rank 1 with PID") != std::string::npos;
    EXPECT_TRUE(named) << err_;
  }
}

TEST_F(SlurmVerify, TheReadmesNightlySbatchLineVerifiesOnTwoNodes) {
  // README's line with 2 nodes and this checkpoint: the batch script's srun is the whole job.
  const std::string log = root_ / "verify.json";
  const CommandResult r = run_command(
      "sbatch --wait --nodes=2 --ntasks-per-node=1 --job-name=ckptcheck-verify-nightly --output=" + log +
      " --wrap \"srun --mpi=pmix " + CKPTCHECK_BIN + " verify --distributed --json '" + dir_ + "'\" 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output << read_text_file(log);
  const std::string out = read_text_file(log);
  // The report is the one line that is a JSON object; rank 0's stderr line shares the file.
  std::string report;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '{') report += line + "\n";
  }
  EXPECT_EQ(without_seconds(report), without_seconds(verify_on_one_node())) << out;
  EXPECT_NE(out.find("rank 1 on n2: "), std::string::npos) << out;
}

TEST_F(SlurmVerify, ASealedDcpCheckpointIsSplitByItsSealsFilesOnTwoNodes) {
  // A PyTorch DCP directory, sealed: the tasks split the seal's files and pieces.
  other_ = root_ / "dcp";
  const CommandResult copy =
      run_command("cp -r '" + std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/torch113' '" + other_ +
                  "' && " + CKPTCHECK_BIN + " seal '" + other_ + "' 2>&1");
  ASSERT_EQ(copy.exit_code, 0) << copy.output;
  const std::string one = verify_on_one_node();
  ASSERT_NE(one.find("\"sealed\":true"), std::string::npos) << one;
  const int code = verify_on_two_nodes(Launcher::kSrun);
  EXPECT_EQ(without_seconds(out_), without_seconds(one)) << err_;
  EXPECT_EQ(code, one.find("\"ok\":true") != std::string::npos ? 0 : 1) << out_ << err_;
  // Each node hashed a share of the seal's units, and says how much (it read "0 units, 0 B" for
  // both while the seal's split went unreported).
  for (const char* node : {"rank 0 on n1: ", "rank 1 on n2: "}) {
    const size_t at = err_.find(node);
    ASSERT_NE(at, std::string::npos) << err_;
    const long units = std::strtol(err_.c_str() + at + std::strlen(node), nullptr, 10);
    EXPECT_GT(units, 0) << node << err_;
  }
}

TEST_F(SlurmVerify, TwoNodesSealADcpCheckpointAsOneNodeDoes) {
  // seal --distributed: each node seals its share of the files, rank 0 writes the one seal file.
  const std::string src = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/torch113";
  const std::string one = root_ / "one", two = root_ / "two";
  ASSERT_EQ(run_command("cp -r '" + src + "' '" + one + "' && cp -r '" + src + "' '" + two + "'").exit_code,
            0);
  const CommandResult local = run_command(std::string(CKPTCHECK_BIN) + " seal '" + one + "' 2>&1");
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const CommandResult r = run_command(
      "srun --nodes=2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 --job-name=ckptcheck-seal-test " +
      std::string(CKPTCHECK_BIN) + " seal --distributed '" + two + "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text_file(two + "/ckptcheck.seal.json"), read_text_file(one + "/ckptcheck.seal.json"));
  // Rank 0 alone printed the summary.
  EXPECT_EQ(r.output.find("sealed "), r.output.rfind("sealed ")) << r.output;
}

TEST_F(SlurmVerify, TwoNodesInspectStatsAsOneNodeDoes) {
  // inspect --stats --distributed: the nodes split the tensors, rank 0 prints the one table.
  const CommandResult one =
      run_command(std::string(CKPTCHECK_BIN) + " inspect --stats --json '" + dir_ + "' 2>&1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string out = root_ / "inspect.json";
  const CommandResult two = run_command(
      "srun --nodes=2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 "
      "--job-name=ckptcheck-inspect-test " +
      std::string(CKPTCHECK_BIN) + " inspect --stats --json --distributed '" + dir_ + "' > " + out + " 2>&1");
  ASSERT_EQ(two.exit_code, 0) << read_text_file(out);
  EXPECT_EQ(read_text_file(out), one.output);
}

}  // namespace
}  // namespace ckpt
