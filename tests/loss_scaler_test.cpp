#include "fixtures/loss_scaler.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

LossScalerConfig pilot_scaler() {
  LossScalerConfig c;
  c.enabled = true;
  c.init_scale = 65536;
  c.growth_factor = 2;
  c.backoff_factor = 0.5;
  c.growth_interval = 4;
  return c;
}

TEST(LossScaler, GrowsAfterIntervalOfFiniteSteps) {
  LossScaler s(pilot_scaler());
  EXPECT_EQ(s.scale(), 65536.0);
  for (int i = 0; i < 3; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.state().growth_tracker, 3);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(LossScaler, NonFiniteBacksOffAndResetsTracker) {
  LossScaler s(pilot_scaler());
  s.update(false);
  s.update(false);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.state().growth_tracker, 0);
  for (int i = 0; i < 4; ++i) s.update(false);  // needs a full interval again
  EXPECT_EQ(s.scale(), 65536.0);
}

TEST(LossScaler, DisabledStaysAtOne) {
  LossScalerConfig c = pilot_scaler();
  c.enabled = false;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 1.0);
  s.update(true);
  for (int i = 0; i < 8; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScaler, RestoreContinuesTheTracker) {
  LossScaler a(pilot_scaler());
  for (int i = 0; i < 3; ++i) a.update(false);
  LossScaler b(pilot_scaler());
  b.restore(a.state());
  b.update(false);
  EXPECT_EQ(b.scale(), 131072.0);
}

}  // namespace
}  // namespace ckpt
