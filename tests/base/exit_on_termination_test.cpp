#include "base/exit_on_termination.h"

#include <gtest/gtest.h>

#include <csignal>

namespace ckpt {
namespace {

// A SIGTERM after the verdict ends the process with the verdict's code; before, as a SIGTERM does.
TEST(ExitOnTerminationDeathTest, ASigtermAfterTheVerdictExitsWithIt) {
  EXPECT_EXIT(
      {
        exit_with_on_termination(1);
        std::raise(SIGTERM);
        std::_Exit(9);  // not reached
      },
      ::testing::ExitedWithCode(1), "");
  EXPECT_EXIT(
      {
        exit_with_on_termination(0);
        std::raise(SIGTERM);
        std::_Exit(9);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        std::raise(SIGTERM);
        std::_Exit(9);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace ckpt
