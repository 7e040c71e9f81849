#include "verifier/process/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

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

}  // namespace
}  // namespace ckpt
