#include "base/open_file_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

// In a child (testing::exit_code_in_child): the limit is the whole process's.
TEST(OpenFileLimit, RaisesTheSoftLimitToTheHardOneAndPutsItBackForAProgram) {
  struct rlimit limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 64) GTEST_SKIP() << "a hard limit of " << limit.rlim_max << " leaves nothing to raise";
  EXPECT_EQ(testing::exit_code_in_child([&limit] {
              struct rlimit lowered = limit;
              lowered.rlim_cur = 32;
              if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) return 2;
              const uint64_t reported = raise_open_file_limit();
              struct rlimit now {};
              if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return 3;
              // Raised to the hard limit, and the limit reported is the one in force.
              if (now.rlim_cur != limit.rlim_max || reported != static_cast<uint64_t>(now.rlim_cur)) return 1;
              // And put back for a program this process starts.
              restore_open_file_limit();
              if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return 3;
              return now.rlim_cur == 32 ? 0 : 4;
            }),
            0)
      << "1: not raised to the hard limit; 4: not put back; 2, 3: the test could not set or read it";
}

}  // namespace
}  // namespace ckpt
