#include "verifier/process/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <thread>

#include "base/open_file_limit.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

Result<ChildProcess> shell(const testing::TempDir& tmp, const std::string& script, bool pipe) {
  return ChildProcess::spawn({"/bin/sh", "-c", script}, tmp / "out.log", tmp / "err.log", pipe);
}

TEST(ChildProcess, SeesAnEventThenKillsTheHeldChild) {
  testing::TempDir tmp;
  auto child = shell(tmp, "echo noise; echo 'ckptcheck-event: committed /ckpt/step_4'; exec sleep 100", true);
  ASSERT_TRUE(child.is_ok()) << child.status().to_string();
  auto detail = child->wait_for_event("committed", 10);
  ASSERT_TRUE(detail.is_ok()) << detail.status().to_string();
  EXPECT_EQ(*detail, "/ckpt/step_4");
  const ChildExit e = child->kill_and_reap();
  EXPECT_TRUE(e.killed_by(SIGKILL)) << e.describe();
  EXPECT_FALSE(child->running());
  EXPECT_NE(testing::read_file_bytes(tmp / "out.log").size(), 0u);  // piped output is also logged
}

// A child that ended is seen as ended before it is reaped, and its exit is still wait()'s to report
// (SlurmStep::start polls for an srun that ends before its step is listed).
TEST(ChildProcess, AnEndedChildIsSeenWithoutBeingReaped) {
  testing::TempDir tmp;
  auto child = shell(tmp, "exit 3", false);
  ASSERT_TRUE(child.is_ok()) << child.status().to_string();
  const auto start = std::chrono::steady_clock::now();
  while (!child->has_ended() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(child->has_ended());
  EXPECT_TRUE(child->running()) << "has_ended() reaped the child";
  const ChildExit e = child->wait(10);
  EXPECT_TRUE(e.exited) << e.describe();
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_FALSE(child->running());

  auto sleeper = shell(tmp, "exec sleep 100", false);
  ASSERT_TRUE(sleeper.is_ok());
  EXPECT_FALSE(sleeper->has_ended());
  EXPECT_TRUE(sleeper->kill_and_reap().killed_by(SIGKILL));
}

TEST(ChildProcess, AnEventThatNeverComesIsNotFoundWhenTheChildExits) {
  testing::TempDir tmp;
  auto child = shell(tmp, "echo 'ckptcheck-event: restored /x'; exit 3", true);
  ASSERT_TRUE(child.is_ok());
  auto detail = child->wait_for_event("committed", 10);
  ASSERT_FALSE(detail.is_ok());
  EXPECT_EQ(detail.status().code(), StatusCode::kNotFound);
  const ChildExit e = child->wait(10);
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.exit_code, 3);
}

// ckptcheck raises its own open-file limit (base/open_file_limit.h); the program a drill starts
// runs under the limit ckptcheck was given. In a child (testing::exit_code_in_child): the limit is
// the whole process's.
TEST(ChildProcess, AProgramRunsUnderTheOpenFileLimitCkptcheckWasGiven) {
  struct rlimit limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max <= 100)
    GTEST_SKIP() << "a hard limit of " << limit.rlim_max << " leaves nothing to raise";
  testing::TempDir tmp;
  EXPECT_EQ(testing::exit_code_in_child([&] {
              struct rlimit given = limit;
              given.rlim_cur = 100;
              if (::setrlimit(RLIMIT_NOFILE, &given) != 0) return 2;
              if (raise_open_file_limit() != static_cast<uint64_t>(limit.rlim_max)) return 3;
              auto child = shell(tmp, "ulimit -n", true);
              if (!child.is_ok()) return 4;
              const ChildExit e = child->wait(10);
              return e.exited && e.exit_code == 0 && child->captured_stdout() == "100\n" ? 0 : 1;
            }),
            0)
      << "1: the program saw another limit than 100 (" << testing::read_text_file(tmp / "out.log")
      << "); 3: not raised; 2, 4: the test could not set its limit or start sh";
}

TEST(ChildProcess, WaitPastTheDeadlineKillsAndReportsATimeout) {
  testing::TempDir tmp;
  auto child = shell(tmp, "exec sleep 100", false);
  ASSERT_TRUE(child.is_ok());
  const auto start = std::chrono::steady_clock::now();
  const ChildExit e = child->wait(0.3);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_TRUE(e.timed_out);
  EXPECT_TRUE(e.killed_by(SIGKILL));
  EXPECT_NE(e.describe().find("timed out"), std::string::npos);
}

TEST(ChildProcess, CapturesStdoutAndLogsStderr) {
  testing::TempDir tmp;
  auto child = shell(tmp, "echo '{\"ok\": true}'; echo oops >&2; exit 0", true);
  ASSERT_TRUE(child.is_ok());
  const ChildExit e = child->wait(10);
  EXPECT_TRUE(e.exited && e.exit_code == 0) << e.describe();
  EXPECT_EQ(child->captured_stdout(), "{\"ok\": true}\n");
  EXPECT_EQ(log_tail(tmp / "err.log"), "oops");
}

TEST(ChildProcess, AMissingProgramExits127) {
  testing::TempDir tmp;
  auto child = ChildProcess::spawn({"/nonexistent/ckptcheck"}, tmp / "o", tmp / "e", false);
  ASSERT_TRUE(child.is_ok());
  const ChildExit e = child->wait(10);
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.exit_code, 127);
}

// The child's environment is this process's, less what is unset, with what is set on top (a value
// may itself hold '='); and it starts with this thread's signal mask, not the one blocked around
// the spawn, so it can be signalled.
TEST(ChildProcess, GetsTheEnvironmentAndSignalMaskItWasGiven) {
  testing::TempDir tmp;
  ::setenv("CKPT_TEST_KEPT", "kept", 1);
  ::setenv("CKPT_TEST_REPLACED", "old", 1);
  ::setenv("CKPT_TEST_REMOVED", "here", 1);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"$CKPT_TEST_KEPT|$CKPT_TEST_REPLACED|${CKPT_TEST_REMOVED-unset}\""};
  o.env = {"CKPT_TEST_REPLACED=new=2"};
  o.unset_env = {"CKPT_TEST_REMOVED"};
  o.pipe_stdout = true;
  auto child = ChildProcess::spawn(o);
  ::unsetenv("CKPT_TEST_KEPT");
  ::unsetenv("CKPT_TEST_REPLACED");
  ::unsetenv("CKPT_TEST_REMOVED");
  ASSERT_TRUE(child.is_ok()) << child.status().to_string();
  const ChildExit e = child->wait(10);
  EXPECT_TRUE(e.exited && e.exit_code == 0) << e.describe();
  EXPECT_EQ(child->captured_stdout(), "kept|new=2|unset\n");

  auto signalled = shell(tmp, "kill -TERM $$; exit 0", false);
  ASSERT_TRUE(signalled.is_ok());
  const ChildExit t = signalled->wait(10);
  EXPECT_TRUE(t.killed_by(SIGTERM)) << t.describe();
}

}  // namespace
}  // namespace ckpt
