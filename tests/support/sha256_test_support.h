// A test fixture parameterised by SHA-256 kernel: each test runs on every kernel this CPU has (a
// kernel it lacks is skipped, saying so) and the automatic choice is restored afterwards.
#pragma once

#include <gtest/gtest.h>

#include "base/sha256_blocks.h"

namespace ckpt::testing {

class Sha256KernelTest : public ::testing::TestWithParam<Sha256Kernel> {
 protected:
  void SetUp() override {
    if (!use_sha256_kernel(GetParam()))
      GTEST_SKIP() << "this CPU has no SHA extensions; " << sha256_kernel_name(GetParam()) << " not run";
  }
  void TearDown() override { ASSERT_TRUE(select_sha256_kernel("auto").is_ok()); }
};

}  // namespace ckpt::testing
