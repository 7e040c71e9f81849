// The drill across world sizes: subject and reference with 2 ranks through `launch`, every rank
// SIGKILLed after the save, resumed with 1 rank, compared within the cross-world tolerance.
#include <gtest/gtest.h>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

std::string drill_args(const std::string& extra) {
  return "drill --config " + std::string(CKPTCHECK_SOURCE_DIR) +
         "/fixtures/configs/pilot-ddp.yaml --nproc-per-node 2 --save-at 2 --resume-steps 1 --json " + extra;
}

TEST(DistributedDrill, TwoRanksResumedOnOnePassesWithinTolerance) {
  auto r = testing::run_ckptcheck(drill_args("--resume-nproc 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"world_sizes\""), std::string::npos);
  EXPECT_NE(r.output.find("\"rtol\": 0.0001"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("subject_killed"), std::string::npos);
}

TEST(DistributedDrill, OneRanksStaleShardFails) {
  auto r = testing::run_ckptcheck(drill_args("--resume-nproc 1 --inject stale-shard"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("verify failed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
