// `train --keep-last N [--keep-every M]` through real processes: what stays, that a SIGKILL in the
// middle of a prune leaves a root `verify --all` accepts and training resumes from, and that the
// order commit+fsync -> latest -> verify -> prune cannot lose the last good checkpoint.
#include <gtest/gtest.h>
#include <signal.h>

#include "base/file_io.h"
#include "shards/checkpoint_dir.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/process/child_process.h"

namespace ckpt {
namespace {

using testing::run_ckptcheck;
using testing::TempDir;

using testing::kPilotConfig;

std::vector<std::string> paths(const TempDir& dir, const std::string& root,
                               const std::vector<int64_t>& steps) {
  std::vector<std::string> out;
  for (int64_t s : steps) out.push_back(dir / (root + "/" + step_dir_name(s)));
  return out;
}

std::vector<std::string> train_argv(const TempDir& dir, const std::string& root, int64_t steps,
                                    std::vector<std::string> extra) {
  std::vector<std::string> argv = {
      CKPTCHECK_BIN,  "train", "--config",   kPilotConfig, "--steps",   std::to_string(steps),
      "--save-every", "2",     "--ckpt-dir", dir / root,   "--metrics", dir / (root + ".jsonl")};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string train_args(const TempDir& dir, const std::string& root, int64_t steps, const std::string& extra) {
  return "train --config " + kPilotConfig + " --steps " + std::to_string(steps) +
         " --save-every 2 --ckpt-dir " + (dir / root) + " --metrics " + (dir / (root + ".jsonl")) + " " +
         extra;
}

TEST(Retention, KeepsTheLastNPlusEveryMultipleOfM) {
  TempDir dir;
  auto run = run_ckptcheck(train_args(dir, "c", 12, "--keep-last 2 --keep-every 4"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto listing = list_checkpoints(dir / "c");
  // Saves at 2..12; the last two are 10 and 12, the multiples of 4 are 4 and 8.
  EXPECT_EQ(listing.committed, paths(dir, "c", {4, 8, 10, 12}));
  EXPECT_TRUE(listing.uncommitted.empty());
  EXPECT_EQ(listing.latest_pointer, "step_00000012");
  auto verify = run_ckptcheck("verify --all " + (dir / "c"));
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
}

TEST(Retention, KeepEveryWithoutKeepLastIsAUsageError) {
  TempDir dir;
  auto run = run_ckptcheck(train_args(dir, "c", 2, "--keep-every 4"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--keep-last"), std::string::npos) << run.output;
  EXPECT_EQ(run_ckptcheck(train_args(dir, "c", 2, "--keep-last 0")).exit_code, 2);
}

TEST(Retention, KillDuringPruneLeavesAVerifiableRootThatResumesBitIdentical) {
  TempDir dir;
  auto reference = run_ckptcheck(train_args(dir, "ref", 8, "--keep-last 1"));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  ASSERT_EQ(list_checkpoints(dir / "ref").committed, paths(dir, "ref", {8}));

  // The save of step 6 prunes step 4 (step 2 went at step 4); hold once step 4 is renamed away.
  auto subject = ChildProcess::spawn(
      train_argv(dir, "run", 8,
                 {"--keep-last", "1", "--drill-hold", "during-prune", "--drill-hold-step", "6"}),
      dir / "subject.out", dir / "subject.err", /*pipe_stdout=*/true);
  ASSERT_TRUE(subject.is_ok()) << subject.status().to_string();
  auto renamed = subject->wait_for_event("prune-renamed", 120);
  ASSERT_TRUE(renamed.is_ok()) << renamed.status().to_string() << " " << log_tail(dir / "subject.err");
  const pid_t pid = subject->pid();
  ASSERT_TRUE(subject->kill_and_reap().killed_by(SIGKILL));

  EXPECT_EQ(*renamed, dir / ("run/.deleting-step_00000004-" + std::to_string(pid)));
  EXPECT_TRUE(is_directory(*renamed));  // killed before its removal
  const auto listing = list_checkpoints(dir / "run");
  EXPECT_EQ(listing.committed, paths(dir, "run", {6}));
  EXPECT_EQ(listing.uncommitted, std::vector<std::string>{*renamed});
  EXPECT_EQ(*resolve_latest_checkpoint(dir / "run"), dir / "run/step_00000006");

  auto verify = run_ckptcheck("verify --all " + (dir / "run"));
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find(".deleting-step_00000004"), std::string::npos) << verify.output;
  auto verify_one = run_ckptcheck("verify " + (dir / "run") + " --json");
  EXPECT_EQ(verify_one.exit_code, 0) << verify_one.output;
  EXPECT_NE(verify_one.output.find("interrupted prune"), std::string::npos) << verify_one.output;

  auto resumed = run_ckptcheck(train_args(dir, "run", 8, "--keep-last 1 --resume latest"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto after = list_checkpoints(dir / "run");
  EXPECT_EQ(after.committed, paths(dir, "run", {8}));
  EXPECT_TRUE(after.uncommitted.empty()) << "the next prune removes the leftover";
  auto diff = run_ckptcheck("diff " + (dir / "ref/step_00000008") + " " + (dir / "run/step_00000008") +
                            " --rtol 0 --atol 0");
  EXPECT_EQ(diff.exit_code, 0) << diff.output;
}

// The failure this order rules out: "an async save moved `latest` before the save was durable and
// the previous good checkpoint had already been pruned". With keep-last 1 and saves every N=2,
// killing the process anywhere in the save of step 2N must leave step N committed and named by
// `latest`; killing it after the commit of 2N but before the prune must leave both.
TEST(Retention, KillDuringTheSaveOf2NLeavesStepNCommittedAndLatest) {
  TempDir dir;
  auto subject = ChildProcess::spawn(
      train_argv(dir, "run", 6,
                 {"--keep-last", "1", "--drill-hold", "during-save", "--drill-hold-step", "4"}),
      dir / "subject.out", dir / "subject.err", /*pipe_stdout=*/true);
  ASSERT_TRUE(subject.is_ok()) << subject.status().to_string();
  ASSERT_TRUE(subject->wait_for_event("shard-written", 120).is_ok()) << log_tail(dir / "subject.err");
  ASSERT_TRUE(subject->kill_and_reap().killed_by(SIGKILL));

  const auto listing = list_checkpoints(dir / "run");
  EXPECT_EQ(listing.committed, paths(dir, "run", {2}));
  EXPECT_TRUE(is_committed_checkpoint(dir / "run/step_00000002"));
  EXPECT_EQ(listing.latest_pointer, "step_00000002");  // what the file says, not a fallback
  ASSERT_EQ(listing.uncommitted.size(), 1u);
  EXPECT_NE(listing.uncommitted[0].find(".tmp-step_00000004-"), std::string::npos) << listing.uncommitted[0];
  auto verify = run_ckptcheck("verify --all " + (dir / "run"));
  EXPECT_EQ(verify.exit_code, 0) << verify.output;

  auto resumed = run_ckptcheck(train_args(dir, "run", 6, "--keep-last 1 --resume latest"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(list_checkpoints(dir / "run").committed, paths(dir, "run", {6}));
}

TEST(Retention, KillAfterTheCommitOf2NButBeforeThePruneKeepsBoth) {
  TempDir dir;
  auto subject = ChildProcess::spawn(
      train_argv(dir, "run", 6, {"--keep-last", "1", "--drill-hold", "after-save", "--drill-hold-step", "4"}),
      dir / "subject.out", dir / "subject.err", /*pipe_stdout=*/true);
  ASSERT_TRUE(subject.is_ok()) << subject.status().to_string();
  // Step 2's commit is announced too; the hold is at step 4's.
  for (;;) {
    auto committed = subject->wait_for_event("committed", 120);
    ASSERT_TRUE(committed.is_ok()) << committed.status().to_string() << " " << log_tail(dir / "subject.err");
    if (*committed == dir / "run/step_00000004") break;
  }
  ASSERT_TRUE(subject->kill_and_reap().killed_by(SIGKILL));
  const auto listing = list_checkpoints(dir / "run");
  EXPECT_EQ(listing.committed, paths(dir, "run", {2, 4}));
  EXPECT_EQ(listing.latest_pointer, "step_00000004");
  EXPECT_EQ(run_ckptcheck("verify --all " + (dir / "run")).exit_code, 0);
}

// Found by scripts/soak.sh: a kill after the rename that commits step 4 but before `latest` moves
// leaves `latest` on step 2. The next writer must resume from step 4, not redo steps 3-4 and then
// refuse to overwrite step_00000004 on every restart.
TEST(Retention, AWriterKilledBeforeMovingLatestIsRolledForwardByTheNext) {
  TempDir dir;
  ASSERT_EQ(run_ckptcheck(train_args(dir, "run", 4, "--keep-last 2")).exit_code, 0);
  ASSERT_TRUE(write_file_atomically(dir / "run/latest", "step_00000002\n").is_ok());
  auto resumed = run_ckptcheck(train_args(dir, "run", 6, "--keep-last 2 --resume latest"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("restored " + (dir / "run/step_00000004")), std::string::npos)
      << resumed.output;
  EXPECT_EQ(list_checkpoints(dir / "run").committed, paths(dir, "run", {4, 6}));
}

TEST(Retention, EveryPruneFollowsTheCommitThatAllowsIt) {
  TempDir dir;
  auto run = ChildProcess::spawn(train_argv(dir, "run", 6, {"--keep-last", "1"}), dir / "run.out",
                                 dir / "run.err", /*pipe_stdout=*/true);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_TRUE(run->wait(120).ok()) << log_tail(dir / "run.err");
  const std::string& out = run->captured_stdout();
  const auto at = [&](const std::string& line) {
    const auto pos = out.find(std::string("ckptcheck-event: ") + line);
    EXPECT_NE(pos, std::string::npos) << line << " missing in:\n" << out;
    return pos;
  };
  EXPECT_LT(at("committed " + (dir / "run/step_00000004")), at("pruned " + (dir / "run/step_00000002")));
  EXPECT_LT(at("committed " + (dir / "run/step_00000006")), at("pruned " + (dir / "run/step_00000004")));
  EXPECT_EQ(list_checkpoints(dir / "run").committed, paths(dir, "run", {6}));
}

}  // namespace
}  // namespace ckpt
