#include "base/open_file_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ckpt {
namespace {

// In a child: the limit is the whole process's.
TEST(OpenFileLimit, RaisesTheSoftLimitToTheHardOneAndPutsItBackForAProgram) {
  struct rlimit limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 64) GTEST_SKIP() << "a hard limit of " << limit.rlim_max << " leaves nothing to raise";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct rlimit lowered = limit;
    lowered.rlim_cur = 32;
    if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) ::_exit(2);
    const uint64_t reported = raise_open_file_limit();
    struct rlimit now {};
    if (::getrlimit(RLIMIT_NOFILE, &now) != 0) ::_exit(3);
    // Raised to the hard limit, and the limit reported is the one in force.
    if (now.rlim_cur != limit.rlim_max || reported != static_cast<uint64_t>(now.rlim_cur)) ::_exit(1);
    // And put back for a program this process starts.
    restore_open_file_limit();
    if (::getrlimit(RLIMIT_NOFILE, &now) != 0) ::_exit(3);
    ::_exit(now.rlim_cur == 32 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not raised to the hard limit; 4: not put back; 2, 3: the test "
                                       "could not set or read it";
}

}  // namespace
}  // namespace ckpt
