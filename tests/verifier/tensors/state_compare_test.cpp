#include "verifier/tensors/state_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "tests/support/test_support.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {
namespace {

// Two states as the drill holds tensors it read whole, compared as it compares them.
std::map<std::string, ComponentDiff> compare_held(const std::vector<LoadedTensor>& reference,
                                                  const std::vector<LoadedTensor>& resumed) {
  StateSnapshot a, b;
  a.tensors.assign(reference.begin(), reference.end());
  b.tensors.assign(resumed.begin(), resumed.end());
  return compare_snapshots(a, b, {});
}

LoadedTensor f32(const std::string& name, const std::string& component, std::vector<int64_t> shape,
                 const std::vector<float>& values) {
  return {name, component, DType::kF32, std::move(shape), testing::bytes_of(values)};
}

LoadedTensor i64(const std::string& name, const std::string& component, const std::vector<int64_t>& values) {
  return {name, component, DType::kI64, {static_cast<int64_t>(values.size())}, testing::bytes_of(values)};
}

TEST(DrillCompare, ToleranceRuleIsAtolPlusRtolTimesReference) {
  EXPECT_TRUE(within_tolerance(1.0, 1.0, {}));
  EXPECT_FALSE(within_tolerance(1.0, std::nextafter(1.0, 2.0), {}));
  EXPECT_TRUE(within_tolerance(100.0, 100.5, {0.01, 0}));   // 0.5 <= 1
  EXPECT_FALSE(within_tolerance(100.0, 102.0, {0.01, 0}));  // 2 > 1
  EXPECT_TRUE(within_tolerance(0.0, 1e-9, {0, 1e-8}));
  EXPECT_TRUE(within_tolerance(NAN, NAN, {}));
  EXPECT_FALSE(within_tolerance(1.0, NAN, {1, 1}));
}

TEST(DrillCompare, IdenticalTensorsAreBitIdentical) {
  const auto a = f32("model.w", "model", {2, 3}, {1, 2, 3, 4, 5, 6});
  const TensorDiff d = compare_tensor(a.view(), a.view(), {});
  EXPECT_TRUE(d.bit_identical());
  EXPECT_TRUE(d.passed());
  EXPECT_EQ(d.elements, 6);
  EXPECT_EQ(d.max_abs, 0);
}

TEST(DrillCompare, ReportsMaxAbsAndItsIndex) {
  const auto a = f32("model.w", "model", {2, 3}, {1, 2, 3, 4, 5, 6});
  const auto b = f32("model.w", "model", {2, 3}, {1, 2.001f, 3, 4, 5, 6.5f});
  const TensorDiff d = compare_tensor(a.view(), b.view(), {});
  EXPECT_FALSE(d.passed());
  EXPECT_EQ(d.differing_elements, 2);
  EXPECT_NEAR(d.max_abs, 0.5, 1e-6);
  EXPECT_EQ(d.max_abs_index, (std::vector<int64_t>{1, 2}));
  EXPECT_NEAR(d.max_rel, 0.5 / 6, 1e-6);
  // Within a loose tolerance the same tensors pass but are still not bit-identical.
  const TensorDiff loose = compare_tensor(a.view(), b.view(), {0.1, 0});
  EXPECT_TRUE(loose.passed());
  EXPECT_FALSE(loose.bit_identical());
}

TEST(DrillCompare, IntegersMustMatchExactlyWhateverTheTolerance) {
  const auto a = i64("progress.step", "progress", {8});
  const auto b = i64("progress.step", "progress", {9});
  const TensorDiff d = compare_tensor(a.view(), b.view(), {1.0, 10.0});
  EXPECT_FALSE(d.passed());
  EXPECT_EQ(d.max_abs, 1);
}

TEST(DrillCompare, ShapeOrDtypeMismatchIsNotComparable) {
  const auto a = f32("model.w", "model", {2, 3}, {1, 2, 3, 4, 5, 6});
  const auto b = f32("model.w", "model", {3, 2}, {1, 2, 3, 4, 5, 6});
  const TensorDiff d = compare_tensor(a.view(), b.view(), {1, 1});
  EXPECT_FALSE(d.passed());
  EXPECT_NE(d.mismatch.find("[2, 3] vs [3, 2]"), std::string::npos) << d.mismatch;
}

TEST(DrillCompare, StatesGroupByComponentAndNameTheFirstDivergingTensor) {
  std::vector<LoadedTensor> ref = {
      f32("model.a", "model", {2}, {1, 2}),
      f32("optimizer.model.a.exp_avg", "optimizer", {2, 2}, {0.1f, 0.2f, 0.3f, 0.4f}),
      i64("scheduler.step", "scheduler", {8})};
  std::vector<LoadedTensor> got = ref;
  got[1] = f32("optimizer.model.a.exp_avg", "optimizer", {2, 2}, {0.1f, 0.2f, 0.3f, 0.0f});
  const auto c = compare_held(ref, got);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(c.at("model").passed);
  EXPECT_TRUE(c.at("model").bit_identical);
  EXPECT_TRUE(c.at("scheduler").passed);
  const ComponentDiff& o = c.at("optimizer");
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.first_diverging_tensor, "optimizer.model.a.exp_avg");
  EXPECT_EQ(o.first_index, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(o.divergence_message(), "optimizer diverged: optimizer.model.a.exp_avg max abs 0.4 at [1, 1]");
}

TEST(DrillCompare, ATensorMissingOnOneSideFailsItsComponent) {
  std::vector<LoadedTensor> ref = {f32("model.a", "model", {2}, {1, 2}), i64("rng.state", "rng", {1, 2})};
  std::vector<LoadedTensor> got = {f32("model.a", "model", {2}, {1, 2})};
  const auto c = compare_held(ref, got);
  EXPECT_FALSE(c.at("rng").passed);
  EXPECT_NE(c.at("rng").divergence_message().find("rng diverged: rng.state missing in the resumed run"),
            std::string::npos);
}

TEST(DrillCompare, UnravelIndexIsRowMajor) {
  EXPECT_EQ(unravel_index(0, {4, 5}), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(unravel_index(7, {4, 5}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(unravel_index(23, {2, 3, 4}), (std::vector<int64_t>{1, 2, 3}));
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(DrillCompare, MetricsDropATornLastLineButRejectAMalformedMiddle) {
  testing::TempDir tmp;
  const std::string line1 = R"({"step":1,"loss":3.5,"lr":0.001,"loss_scale":65536,"grad_norm":1.25})";
  const std::string line2 = R"({"step":2,"loss":3.25,"lr":0.002,"loss_scale":65536,"grad_norm":1.0})";
  write_text(tmp / "ok.jsonl", line1 + "\n" + line2 + "\n" + R"({"step":3,"lo)");
  auto ok = read_step_metrics(tmp / "ok.jsonl");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].step, 2);
  EXPECT_EQ((*ok)[1].loss, 3.25);
  EXPECT_EQ((*ok)[0].values.at("grad_norm"), 1.25);
  write_text(tmp / "bad.jsonl", line1 + "\nnot json\n" + line2 + "\n");
  auto bad = read_step_metrics(tmp / "bad.jsonl");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find("line 2: `not json`: not JSON"), std::string::npos)
      << bad.status().message();
  // A run still writing its file: the unterminated last line waits, every complete one must parse.
  write_text(tmp / "partial.jsonl", "{\"step\": 1, \"train_loss\": 2}\n{\"step\": 2, \"lo");
  auto partial = read_metrics_log(tmp / "partial.jsonl", "", true);
  ASSERT_FALSE(partial.is_ok());
  EXPECT_NE(partial.status().message().find("line 1: `{\"step\": 1, \"train_loss\": 2}`: no \"loss\""),
            std::string::npos)
      << partial.status().message();
  write_text(tmp / "growing.jsonl", line1 + "\n{\"step\":2,\"lo");
  auto growing = read_metrics_log(tmp / "growing.jsonl", "", true);
  ASSERT_TRUE(growing.is_ok()) << growing.status().to_string();
  EXPECT_EQ(growing->steps.size(), 1u);
}

TEST(DrillCompare, ARelativeCheckpointPathIsReadFromTheCheckpointDir) {
  testing::TempDir tmp;
  write_text(tmp / "m.jsonl",
             "{\"event\": \"checkpoint\", \"step\": 2, \"path\": \"step_2\"}\n"
             "{\"event\": \"checkpoint\", \"step\": 4, \"path\": \"/abs/step_4\"}\n");
  auto log = read_metrics_log(tmp / "m.jsonl", "/runs/ckpt");
  ASSERT_TRUE(log.is_ok()) << log.status().to_string();
  ASSERT_EQ(log->checkpoints.size(), 2u);
  EXPECT_EQ(log->checkpoints[0].path, "/runs/ckpt/step_2");
  EXPECT_EQ(log->checkpoints[1].path, "/abs/step_4");
}

TEST(DrillCompare, AByteStateSaysWhereItFirstDiffers) {
  std::vector<uint8_t> a(5056, 7), b = a;
  b[2097] = 1;
  b[3000] = 9;
  const LoadedTensor ref{"rng.cpu_state", "rng", DType::kU8, {5056}, a};
  const LoadedTensor got{"rng.cpu_state", "rng", DType::kU8, {5056}, b};
  const auto components = compare_held({ref}, {got});
  ASSERT_EQ(components.count("rng"), 1u);
  EXPECT_EQ(components.at("rng").divergence_message(),
            "rng diverged: rng.cpu_state: RNG state differs (byte 2097 of 5056)");
}

StepRecord record(int64_t step, double loss, double lr) {
  return {step, loss, {{"lr", lr}, {"loss_scale", 65536}, {"grad_norm", 1.0}}};
}

const SeriesDiff& field(const std::vector<SeriesDiff>& diffs, const std::string& name) {
  for (const auto& d : diffs)
    if (d.field == name) return d;
  static SeriesDiff none;
  ADD_FAILURE() << "no series " << name;
  return none;
}

TEST(DrillCompare, StepMetricsCompareOnlyTheResumedSteps) {
  std::vector<StepRecord> ref;
  for (int s = 1; s <= 6; ++s) ref.push_back(record(s, 4.0 - 0.1 * s, 1e-3 * s));
  std::vector<StepRecord> same(ref.begin() + 3, ref.end());
  const auto all = compare_step_metrics(ref, same, {});
  ASSERT_EQ(all.size(), 4u);  // loss, then grad_norm, loss_scale, lr by name
  EXPECT_EQ(all[0].field, "loss");
  for (const auto& d : all) {
    EXPECT_TRUE(d.passed) << d.field;
    EXPECT_TRUE(d.bit_identical) << d.field;
    EXPECT_EQ(d.steps_compared, 3) << d.field;
  }
  auto off = same;
  off[1].loss += 0.01;  // step 5
  const auto diffs = compare_step_metrics(ref, off, {});
  ASSERT_EQ(diffs[0].field, "loss");
  EXPECT_FALSE(diffs[0].passed);
  EXPECT_EQ(diffs[0].first_diverging_step, 5);
  EXPECT_NEAR(diffs[0].max_abs, 0.01, 1e-12);
  EXPECT_TRUE(field(diffs, "lr").passed);  // lr untouched
  off.push_back(record(9, 1, 1));          // a step the reference never ran
  EXPECT_EQ(field(compare_step_metrics(ref, off, {1, 1}), "lr").missing_steps, (std::vector<int64_t>{9}));
}

// The contract: any numeric field is compared, timings are not, and a field the resumed run
// stopped logging fails its series.
TEST(DrillCompare, ContractFieldsTimingsAndEvents) {
  testing::TempDir tmp;
  write_text(tmp / "m.jsonl",
             "{\"step\":1,\"loss\":2.5,\"eval_loss\":3,\"step_ms\":12.5,\"phase_seconds\":1}\n"
             "{\"event\":\"checkpoint\",\"step\":1,\"path\":\"/c/step1.pt\"}\n"
             "{\"event\":\"restored\"}\n"
             "{\"step\":2,\"loss\":2.25}\n");
  auto log = read_metrics_log(tmp / "m.jsonl");
  ASSERT_TRUE(log.is_ok()) << log.status().to_string();
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_EQ(log->steps[0].values.size(), 1u);  // eval_loss; step_ms and phase_seconds are timings
  EXPECT_EQ(log->steps[0].values.at("eval_loss"), 3);
  ASSERT_EQ(log->checkpoints.size(), 1u);
  EXPECT_EQ(log->checkpoints[0].step, 1);
  EXPECT_EQ(log->checkpoints[0].path, "/c/step1.pt");
  std::vector<StepRecord> resumed = {{1, 2.5, {}}};
  const auto diffs = compare_step_metrics(log->steps, resumed, {});
  EXPECT_TRUE(field(diffs, "loss").passed);
  EXPECT_FALSE(field(diffs, "eval_loss").passed);
  EXPECT_EQ(field(diffs, "eval_loss").missing_field, (std::vector<int64_t>{1}));
}

// Python's json.dumps writes NaN and Infinity for a diverged run: read as numbers, not a bad line.
TEST(DrillCompare, PythonNanAndInfinityAreNumbers) {
  testing::TempDir tmp;
  write_text(tmp / "m.jsonl",
             "{\"step\": 1, \"loss\": NaN, \"grad_norm\": Infinity, \"lr\": -Infinity, \"note\": \"NaN\"}\n"
             "{\"step\": 2, \"loss\": 1.5}\n");
  auto log = read_metrics_log(tmp / "m.jsonl");
  ASSERT_TRUE(log.is_ok()) << log.status().to_string();
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_TRUE(std::isnan(log->steps[0].loss));
  EXPECT_EQ(log->steps[0].values.at("grad_norm"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(log->steps[0].values.at("lr"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(log->steps[0].values.count("note"), 0u);  // a string that says NaN is not a number
  // A NaN where the reference has a number diverges; NaN against NaN matches.
  std::vector<StepRecord> finite = {{1, 2.0, {}}};
  EXPECT_FALSE(compare_step_metrics(finite, {log->steps[0]}, {})[0].passed);
  EXPECT_TRUE(compare_step_metrics({log->steps[0]}, {log->steps[0]}, {})[0].passed);
}

}  // namespace
}  // namespace ckpt
