#include "fixtures/lr_schedule.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

SchedulerConfig pilot_schedule() {
  SchedulerConfig c;
  c.warmup_steps = 4;
  c.total_steps = 64;
  c.min_lr_ratio = 0.1;
  return c;
}

TEST(LrSchedule, WarmupIsLinearFromOneStep) {
  LrSchedule s(pilot_schedule(), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 1.0);
}

TEST(LrSchedule, CosineDecaysToTheFloor) {
  LrSchedule s(pilot_schedule(), 2.0);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 2.0);            // progress 0
  EXPECT_NEAR(s.lr_at(34), 2.0 * 0.55, 1e-15);  // progress 0.5: 0.1 + 0.9 * 0.5
  // progress 0.25: 0.1 + 0.9 * 0.5 * (1 + cos(pi/4)) = 0.868198...
  EXPECT_NEAR(s.lr_at(19), 2.0 * 0.8681980515339464, 1e-12);
  EXPECT_DOUBLE_EQ(s.lr_at(64), 0.2);
  EXPECT_DOUBLE_EQ(s.lr_at(1000), 0.2);
}

TEST(LrSchedule, StepAdvancesStateAndRestoreResumes) {
  LrSchedule s(pilot_schedule(), 1.0);
  EXPECT_EQ(s.state().last_step, 0);
  EXPECT_DOUBLE_EQ(s.current_lr(), 0.25);
  s.step();
  s.step();
  EXPECT_EQ(s.state().last_step, 2);
  EXPECT_DOUBLE_EQ(s.current_lr(), 0.75);
  EXPECT_DOUBLE_EQ(s.state().base_lr, 1.0);
  LrSchedule resumed(pilot_schedule(), 1.0);
  resumed.restore(s.state());
  resumed.step();
  s.step();
  EXPECT_EQ(resumed.state().last_step, 3);
  EXPECT_DOUBLE_EQ(resumed.current_lr(), s.current_lr());
}

TEST(LrSchedule, NoWarmup) {
  SchedulerConfig c = pilot_schedule();
  c.warmup_steps = 0;
  c.total_steps = 10;
  LrSchedule s(c, 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1.0);
  EXPECT_NEAR(s.lr_at(5), 0.55, 1e-15);
}

}  // namespace
}  // namespace ckpt
