// The stall time of `drill --live` (live_stall.h): --stall-timeout as given, else max(60 s, 10 x the
// run's median step interval).
#include "verifier/drill/live_stall.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

TEST(LiveStall, TheRuleIsTenMedianStepIntervalsAndAtLeastAMinute) {
  EXPECT_EQ(live_stall_seconds(-1, {}), 60);
  EXPECT_EQ(live_stall_seconds(-1, {0.05, 0.06, 0.04}), 60);
  EXPECT_EQ(live_stall_seconds(-1, {30, 1, 31}), 300);         // a slow step's median, not its mean
  EXPECT_EQ(live_stall_seconds(-1, {10, 20, 30, 4000}), 250);  // an even count: the middle two
  EXPECT_EQ(live_stall_seconds(5, {30}), 5);                   // --stall-timeout as given
  EXPECT_EQ(live_stall_seconds(0, {}), 0);                     // 0: never
}

TEST(LiveStall, ALogJustWrittenIsNotStalledAndOneNeverChangingIsAfterTheStallTime) {
  testing::TempDir dir;
  const std::string log = dir / "metrics.jsonl";
  std::ofstream(log) << "{\"step\": 1, \"loss\": 1.0}\n";
  LiveStallWatch watch(log, 0.3, 0, 0);
  watch.observe(1);
  EXPECT_FALSE(watch.stalled());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  watch.observe(1);
  EXPECT_TRUE(watch.stalled());
  EXPECT_NE(watch.not_advancing_words(8).find("its last step is 1, its log last written at "),
            std::string::npos)
      << watch.not_advancing_words(8);
  LiveStallWatch never(log, 0, 0, 0);
  never.observe(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(never.stalled());
}

}  // namespace
}  // namespace ckpt
