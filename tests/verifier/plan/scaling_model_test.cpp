// The data-parallel model against numbers worked out by hand.
#include "verifier/plan/scaling_model.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

constexpr double kGB = 1e9;

ScalingModel hand_model() {
  ScalingModel m;
  m.compute_seconds = 1.0;    // C
  m.optimizer_seconds = 0.1;  // O
  m.data_seconds = 0.05;      // D
  m.gradient_bytes = 1 * kGB;
  m.bus_bytes_per_second = 10 * kGB;
  return m;
}

TEST(ScalingModel, RingAllReduceMovesTwoTimesPMinusOneOverPOfTheBuffer) {
  EXPECT_EQ(ring_allreduce_bytes(1, 100), 0);
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes(2, 100), 100);  // 2 * 1/2
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes(4, 100), 150);  // 2 * 3/4
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes(8, 100), 175);  // 2 * 7/8
}

TEST(ScalingModel, StepTimeByHand) {
  const ScalingModel m = hand_model();
  EXPECT_DOUBLE_EQ(m.step_seconds(1), 1.15);  // 1 + 0.1 + 0.05, no all-reduce
  // P = 2: 1/2 + 0.1 + 0.025 + (2 * 1/2 * 1 GB) / 10 GB/s = 0.5 + 0.1 + 0.025 + 0.1
  EXPECT_DOUBLE_EQ(m.step_seconds(2), 0.725);
  // P = 4: 0.25 + 0.1 + 0.0125 + 1.5 GB / 10 GB/s = 0.5125
  EXPECT_DOUBLE_EQ(m.step_seconds(4), 0.5125);
  // Twice as fast an accelerator halves C and O, not the host's input wait nor the wire:
  // P = 2, s = 2: 0.25 + 0.05 + 0.025 + 0.1 = 0.425
  EXPECT_DOUBLE_EQ(m.step_seconds(2, 2.0), 0.425);
  // Another interconnect: P = 2 at 100 GB/s: 0.5 + 0.1 + 0.025 + 0.01 = 0.635
  EXPECT_DOUBLE_EQ(m.step_seconds(2, 1.0, 100 * kGB), 0.635);
}

TEST(ScalingModel, CalibratesOnWorldOneAndTheSmallestUsableWorld) {
  std::vector<ScalingPoint> points(3);
  points[0] = {1, 1.2, 1.0, 0.1, 0.0, 0.05, false};
  points[1] = {2, 0.8, 0.5, 0.1, 0.2, 0.025, false};  // all-reduce of 1 GB took 0.2 s: B = 5 GB/s
  points[2] = {3, 0.9, 0.5, 0.1, 0.3, 0.02, true};    // more ranks than cores: never used
  std::vector<int> used;
  Result<ScalingModel> m = calibrate_scaling_model(points, 1 * kGB, &used);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(used, (std::vector<int>{1, 2}));
  EXPECT_DOUBLE_EQ(m->compute_seconds, 1.0);
  EXPECT_DOUBLE_EQ(m->optimizer_seconds, 0.1);
  EXPECT_DOUBLE_EQ(m->data_seconds, 0.05);
  EXPECT_DOUBLE_EQ(m->bus_bytes_per_second, 5 * kGB);
  // Held-out world 3: 1/3 + 0.1 + 0.05/3 + (2 * 2/3 * 1 GB) / 5 GB/s = 0.7166... (measured 0.92)
  const nlohmann::json v = validate_scaling_model(*m, points, used);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(v[1]["calibration"].get<bool>());
  EXPECT_FALSE(v[2]["calibration"].get<bool>());
  EXPECT_TRUE(v[2]["oversubscribed"].get<bool>());
  EXPECT_NEAR(v[2]["predicted_step_seconds"].get<double>(), 1.0 / 3 + 0.1 + 0.05 / 3 + 4.0 / 15, 1e-12);
  EXPECT_NEAR(v[2]["measured_step_seconds"].get<double>(), 0.92, 1e-12);  // parts: 0.5+0.1+0.02+0.3
  EXPECT_NEAR(v[2]["predicted_communication_seconds"].get<double>(), 4.0 / 15, 1e-12);
  EXPECT_NEAR(v[2]["predicted_compute_seconds"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_NEAR(v[2]["measured_compute_seconds"].get<double>(), 0.5, 1e-12);
  // The calibration point is reproduced exactly: 0.5 + 0.1 + 0.025 + 0.2 = 0.825
  EXPECT_NEAR(v[1]["predicted_step_seconds"].get<double>(), 0.825, 1e-12);
  EXPECT_NEAR(v[1]["step_relative_error"].get<double>(), 0.0, 1e-12);
}

TEST(ScalingModel, CalibrationNeedsWorldOneAndAUsableLargerWorld) {
  std::vector<int> used;
  std::vector<ScalingPoint> only_two = {{2, 1, 0.5, 0.1, 0.2, 0.0, false}};
  Result<ScalingModel> m = calibrate_scaling_model(only_two, 1e9, &used);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("world size 1"), std::string::npos) << m.status().message();
  std::vector<ScalingPoint> oversubscribed = {{1, 1, 1, 0, 0, 0, false}, {2, 1, 0.5, 0.1, 0.2, 0.0, true}};
  m = calibrate_scaling_model(oversubscribed, 1e9, &used);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("core per rank"), std::string::npos) << m.status().message();
}

TEST(ScalingModel, CurveFindsWhereAddingAcceleratorsStopsPaying) {
  const ScalingModel m = hand_model();  // T(1) = 1.15
  // P=2: 0.725 -> speedup 1.586, efficiency 0.793; P=4: 0.5125 -> 2.244, 0.561;
  // P=8: 0.125 + 0.1 + 0.00625 + 0.175 = 0.40625 -> 2.831, 0.354
  const ScalingCurve c = scaling_curve(m, 1.0, 10 * kGB, 10 * kGB, 8, 8, 0.7);
  ASSERT_EQ(c.worlds, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_NEAR(c.step_seconds[3], 0.40625, 1e-12);
  EXPECT_NEAR(c.efficiency[1], 1.15 / 0.725 / 2, 1e-12);
  EXPECT_EQ(c.stops_paying_after, 2);  // 0.793 >= 0.7 > 0.561
  EXPECT_EQ(c.fastest_world, 8);
  // Past the node the slower network takes over: P = 16 at 1 GB/s across nodes is slower than 8.
  const ScalingCurve wide = scaling_curve(m, 1.0, 10 * kGB, 1 * kGB, 8, 16, 0.7);
  // P=16: 1/16 + 0.1 + 0.05/16 + 2 * 15/16 * 1 GB / 1 GB/s = 2.040625
  EXPECT_NEAR(wide.step_seconds[4], 2.040625, 1e-12);
  EXPECT_EQ(wide.fastest_world, 8);
}

TEST(ScalingModel, ReadsARunAndRefusesBadNumbers) {
  nlohmann::json run = {{"world_size", 2},
                        {"oversubscribed", false},
                        {"timings",
                         {{"step_seconds_mean", 0.8},
                          {"forward_backward_seconds_mean", 0.5},
                          {"optimizer_seconds_mean", 0.1},
                          {"communication_seconds_mean", 0.2},
                          {"data_wait_seconds_mean", 0.01}}}};
  Result<ScalingPoint> p = scaling_point_from_json(run, "report.json: scaling.runs[1]");
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->world_size, 2);
  EXPECT_DOUBLE_EQ(p->communication_seconds, 0.2);
  run["timings"]["communication_seconds_mean"] = -1;
  p = scaling_point_from_json(run, "report.json: scaling.runs[1]");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("scaling.runs[1].timings: field 'communication_seconds_mean'"),
            std::string::npos)
      << p.status().message();
  run["world_size"] = 0;
  EXPECT_FALSE(scaling_point_from_json(run, "r").is_ok());
}

}  // namespace
}  // namespace ckpt
