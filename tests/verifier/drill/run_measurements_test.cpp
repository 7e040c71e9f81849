// The drill's outside measurements: figures from hand-made timelines, nulls for what was not
// measured, and a live RunWatch on a metrics file written while it watches.
#include "verifier/drill/run_measurements.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/support/test_support.h"
#include "verifier/process/child_process.h"

namespace ckpt {
namespace {

LineArrival step_at(int64_t step, double seconds, std::map<std::string, double> reported = {}) {
  LineArrival a;
  a.step = step;
  a.seconds = seconds;
  a.reported = std::move(reported);
  return a;
}

LineArrival checkpoint_at(int64_t step, double seconds) {
  LineArrival a = step_at(step, seconds);
  a.checkpoint = true;
  return a;
}

// Start-up 2 s, steps of 0.5 s, a 3 s save after step 2 and a 1 s save after step 4.
RunTimeline two_saves() {
  RunTimeline t;
  t.lines = {step_at(1, 2.5), step_at(2, 3.0), checkpoint_at(2, 6.0),
             step_at(3, 6.5), step_at(4, 7.0), checkpoint_at(4, 8.0)};
  return t;
}

TEST(RunMeasurements, StepTimeExcludesSavesAndSaveStallRunsFromStepLineToEvent) {
  const TimelineFigures f = timeline_figures(two_saves());
  ASSERT_TRUE(f.first_step_seconds && f.step_seconds_mean && f.save_stall_seconds_mean);
  EXPECT_DOUBLE_EQ(*f.first_step_seconds, 2.5);
  EXPECT_DOUBLE_EQ(*f.step_seconds_mean, 0.5);  // 2.5->3.0, 6.0->6.5, 6.5->7.0
  EXPECT_EQ(f.step_intervals, 3);
  EXPECT_DOUBLE_EQ(*f.save_stall_seconds_mean, 2.0);  // (3 + 1) / 2
  EXPECT_DOUBLE_EQ(*f.save_stall_seconds_max, 3.0);
  EXPECT_EQ(f.saves, 2);
  EXPECT_FALSE(f.tokens_per_step_mean);
  EXPECT_FALSE(f.peak_memory_bytes);
  EXPECT_FALSE(f.data_wait_seconds_mean);
}

TEST(RunMeasurements, ReportedFieldsAreReadAndUnitsConverted) {
  RunTimeline t;
  t.lines = {step_at(1, 1, {{"tokens", 100}, {"peak_memory_bytes", 5e6}, {"data_wait_ms", 20}}),
             step_at(2, 2, {{"tokens", 300}, {"data_wait_ms", 40}})};
  const TimelineFigures f = timeline_figures(t);
  EXPECT_DOUBLE_EQ(f.tokens_per_step_mean.value_or(-1), 200);
  EXPECT_DOUBLE_EQ(f.peak_memory_bytes.value_or(-1), 5e6);
  EXPECT_DOUBLE_EQ(f.data_wait_seconds_mean.value_or(-1), 0.03);  // ms -> s
  EXPECT_FALSE(f.save_stall_seconds_mean);
}

TEST(RunMeasurements, ParsesStepLinesEventsAndPythonSpecials) {
  LineArrival a;
  ASSERT_TRUE(parse_line_arrival(R"({"step": 3, "loss": NaN, "tokens": 64})", 1.5, &a));
  EXPECT_EQ(a.step, 3);
  EXPECT_FALSE(a.checkpoint);
  EXPECT_DOUBLE_EQ(a.seconds, 1.5);
  EXPECT_DOUBLE_EQ(a.reported.at("tokens"), 64);
  ASSERT_TRUE(parse_line_arrival(R"({"event": "checkpoint", "step": 4, "path": "/x"})", 2, &a));
  EXPECT_TRUE(a.checkpoint);
  EXPECT_EQ(a.step, 4);
  EXPECT_FALSE(parse_line_arrival(R"({"event": "eval", "step": 4})", 2, &a));
  EXPECT_FALSE(parse_line_arrival(R"({"loss": 1})", 2, &a));
  EXPECT_FALSE(parse_line_arrival("{\"step\": 1, \"lo", 2, &a));
}

TEST(RunMeasurements, NotMeasuredIsNullAndEveryValueNamesItsSource) {
  OutsideInputs in;
  in.reference = two_saves();
  in.reference.rss = {200ull << 20, 40, 3, 0.05};
  RunTimeline resumed;
  resumed.lines = {step_at(5, 4.0)};
  in.resumed = {resumed};
  in.components = {{"model", 4000}, {"optimizer", 8000}, {"scheduler", 16}, {"rng", 100}};
  in.checkpoint_bytes = 12251;
  in.ranks = 2;
  const nlohmann::json m = outside_measurements(in);
  const auto& t = m["timings"];
  const auto& mem = m["memory"];
  const auto& src = m["sources"];
  EXPECT_DOUBLE_EQ(t["step_seconds_mean"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(t["checkpoint_save_seconds"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(t["checkpoint_bytes"].get<double>(), 12251);
  EXPECT_DOUBLE_EQ(t["checkpoint_mb_per_second"].get<double>(), 12251 / 1e6 / 2.0);
  EXPECT_DOUBLE_EQ(t["restore_seconds"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(t["fresh_start_seconds"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(mem["peak_rss_bytes"].get<double>(), 200.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(mem["peak_rss_bytes_per_rank"].get<double>(), 100.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(mem["parameter_bytes"].get<double>(), 4000);
  EXPECT_DOUBLE_EQ(mem["gradient_bytes"].get<double>(), 4000);
  EXPECT_DOUBLE_EQ(mem["optimizer_state_bytes"].get<double>(), 8000);
  EXPECT_DOUBLE_EQ(mem["other_state_bytes"].get<double>(), 116);
  for (const char* key : {"tokens_per_second", "data_wait_seconds_mean", "eval_seconds", "verify_seconds",
                          "forward_backward_seconds_mean"}) {
    EXPECT_TRUE(t[key].is_null()) << key;
    EXPECT_EQ(src[key], "not measured") << key;
  }
  EXPECT_TRUE(mem["peak_memory_bytes"].is_null());
  EXPECT_TRUE(mem["activation_bytes_estimate"].is_null());
  EXPECT_TRUE(m["eval_every_steps"].is_null());
  EXPECT_EQ(src["peak_rss_bytes"].get<std::string>().rfind("measured:", 0), 0u);
  EXPECT_NE(src["peak_rss_bytes"].get<std::string>().find("every 50 ms"), std::string::npos);
  EXPECT_EQ(src["gradient_bytes"].get<std::string>().rfind("assumed:", 0), 0u);
  for (const auto& [key, value] : t.items()) EXPECT_TRUE(src.contains(key)) << key;
  for (const auto& [key, value] : mem.items()) {
    if (!value.is_object()) {
      EXPECT_TRUE(src.contains(key)) << key;
    }
  }
}

TEST(RunMeasurements, NothingLoggedGivesNullsNotZeros) {
  const nlohmann::json m = outside_measurements(OutsideInputs{});
  for (const char* key :
       {"step_seconds_mean", "checkpoint_save_seconds", "checkpoint_bytes", "restore_seconds"})
    EXPECT_TRUE(m["timings"][key].is_null()) << key;
  for (const char* key : {"peak_rss_bytes", "parameter_bytes", "optimizer_state_bytes"})
    EXPECT_TRUE(m["memory"][key].is_null()) << key;
}

TEST(RunMeasurements, ComponentBytesAndBytesOnDisk) {
  StateSnapshot s;
  s.tensors.push_back(LoadedTensor{"model.w", "model", DType::kF32, {4}, std::vector<uint8_t>(16)});
  s.tensors.push_back(LoadedTensor{"model.b", "model", DType::kF32, {1}, std::vector<uint8_t>(4)});
  s.tensors.push_back(LoadedTensor{"optimizer.m", "optimizer", DType::kF32, {2}, std::vector<uint8_t>(8)});
  const auto bytes = component_bytes(s);
  EXPECT_EQ(bytes.at("model"), 20u);
  EXPECT_EQ(bytes.at("optimizer"), 8u);
  testing::TempDir dir;
  dir.write("a.bin", std::string(1000, 'x'));
  std::filesystem::create_directory(dir.path() + "/sub");
  dir.write("sub/b.bin", std::string(24, 'y'));
  EXPECT_EQ(bytes_on_disk(dir.path()), 1024u);
  EXPECT_EQ(bytes_on_disk(dir.path() + "/a.bin"), 1000u);
  EXPECT_EQ(bytes_on_disk(dir.path() + "/missing"), 0u);
}

TEST(RunWatch, RecordsWhenLinesArriveInOrder) {
  testing::TempDir dir;
  const std::string metrics = dir.path() + "/metrics.jsonl";
  SpawnOptions o;
  o.argv = {"/bin/sleep", "5"};
  auto child = ChildProcess::spawn(o);
  ASSERT_TRUE(child.is_ok());
  RunWatch watch(child->pid(), metrics);
  std::ofstream out(metrics);
  out << R"({"step": 1, "loss": 1})"
      << "\n"
      << std::flush;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  out << R"({"step": 2, "loss": 1})"
      << "\n"
      << R"({"event": "checkpoint", "step": 2, "path": "p"})"
      << "\n"
      << R"({"step": 3, "lo)" << std::flush;  // a torn line is not read
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const RunTimeline t = watch.stop();
  child->kill_and_reap();
  ASSERT_EQ(t.lines.size(), 3u);
  EXPECT_EQ(t.lines[0].step, 1);
  EXPECT_TRUE(t.lines[2].checkpoint);
  // The test waited 300 ms between the lines: bounds loose enough for a loaded machine, tight
  // enough to catch a zero or milliseconds.
  EXPECT_GE(t.lines[1].seconds - t.lines[0].seconds, 0.1);
  EXPECT_LT(t.lines[1].seconds - t.lines[0].seconds, 30);
  EXPECT_GT(t.rss.samples, 0);
  EXPECT_GT(t.rss.peak_bytes, 0u);
  EXPECT_EQ(watch.stop().lines.size(), 3u);  // stop() again returns the same timeline
}

}  // namespace
}  // namespace ckpt
