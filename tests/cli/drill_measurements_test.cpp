// What `ckptcheck drill -- COMMAND` measures of any program from outside, checked against a program
// whose costs the test sets (tests/data/programs/measured_program.py: it sleeps a known time at
// start-up and in every save, and holds a known number of touched bytes), and `plan` on the
// report: every figure labelled measured, reported by the program, or assumed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

const std::string kProgram = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/measured_program.py";
constexpr double kStartSleep = 1.0, kSaveSleep = 0.5, kStepSleep = 0.05;
// Times come from when lines are seen in the metrics file, polled every few ms by a thread that a
// loaded machine may delay: one interval can come out a little shorter than the sleep behind it.
// 0.8x still catches a value that was never measured (0) or is in the wrong unit.
constexpr double kSeenAtLeast = 0.8;
constexpr double kHeldBytes = 64.0 * (1 << 20);
// model: 1000 float32; optimizer: two moments of 1000 float32 (safetensors, plus small headers).
constexpr double kModelBytes = 4000, kOptimizerBytes = 8000;

nlohmann::json drill_report_of(const testing::TempDir& dir, const std::string& program_args) {
  char args[256];
  std::snprintf(args, sizeof args, "--start-sleep %g --save-sleep %g --step-sleep %g --hold-bytes %.0f",
                kStartSleep, kSaveSleep, kStepSleep, kHeldBytes);
  const auto r =
      testing::run_ckptcheck("drill --save-at 4 --resume-steps 4 --report-dir " + dir.path() +
                             "/report -- /usr/bin/python3 " + kProgram + " " + args + " " + program_args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir.path() + "/report/report.json");
  return nlohmann::json::parse(in, nullptr, false);
}

std::string source(const nlohmann::json& report, const char* key) {
  const auto& s = report["measurements"]["sources"];
  return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : "(none)";
}

bool begins_with(const nlohmann::json& s, const std::string& prefix) {
  return s.is_string() && s.get<std::string>().rfind(prefix, 0) == 0;
}

// Bounds loose enough for a loaded 2-core machine, tight enough to catch a zero, a missing
// sleep or the wrong unit (milliseconds, KiB, pages).
void expect_outside_measurements(const nlohmann::json& report) {
  const auto& t = report["measurements"]["timings"];
  const auto& m = report["measurements"]["memory"];
  ASSERT_TRUE(t["restore_seconds"].is_number()) << t.dump();
  EXPECT_GE(t["restore_seconds"].get<double>(), kSeenAtLeast * kStartSleep);
  EXPECT_LT(t["restore_seconds"].get<double>(), 60);
  EXPECT_GE(t["fresh_start_seconds"].get<double>(), kSeenAtLeast * kStartSleep);
  ASSERT_TRUE(t["checkpoint_save_seconds"].is_number()) << t.dump();
  EXPECT_GE(t["checkpoint_save_seconds"].get<double>(), kSeenAtLeast * kSaveSleep);
  EXPECT_LT(t["checkpoint_save_seconds"].get<double>(), 30);
  ASSERT_TRUE(t["step_seconds_mean"].is_number()) << t.dump();
  EXPECT_GE(t["step_seconds_mean"].get<double>(), kSeenAtLeast * kStepSleep);
  EXPECT_LT(t["step_seconds_mean"].get<double>(), kSaveSleep);  // the saves are not counted as steps
  EXPECT_GE(t["checkpoint_bytes"].get<double>(), kModelBytes + kOptimizerBytes);
  EXPECT_LT(t["checkpoint_bytes"].get<double>(), kModelBytes + kOptimizerBytes + 4096);
  EXPECT_TRUE(t["forward_backward_seconds_mean"].is_null());
  EXPECT_TRUE(t["verify_seconds"].is_null());
  ASSERT_TRUE(m["peak_rss_bytes"].is_number()) << m.dump();
  EXPECT_GE(m["peak_rss_bytes"].get<double>(), kHeldBytes);
  EXPECT_LT(m["peak_rss_bytes"].get<double>(), kHeldBytes + 1024.0 * (1 << 20));
  EXPECT_NE(source(report, "peak_rss_bytes").find("sampled from /proc every 50 ms"), std::string::npos)
      << source(report, "peak_rss_bytes");
  EXPECT_EQ(m["parameter_bytes"].get<double>(), kModelBytes);
  EXPECT_EQ(m["optimizer_state_bytes"].get<double>(), kOptimizerBytes);
  EXPECT_TRUE(begins_with(source(report, "gradient_bytes"), "assumed")) << source(report, "gradient_bytes");
  for (const char* key : {"step_seconds_mean", "checkpoint_save_seconds", "restore_seconds",
                          "checkpoint_bytes", "parameter_bytes"})
    EXPECT_TRUE(begins_with(source(report, key), "measured")) << key << ": " << source(report, key);
}

nlohmann::json plan_of(const testing::TempDir& dir) {
  // From an empty working directory and without --catalog: the catalog is found from the binary.
  const std::string empty = dir.path() + "/empty";
  std::filesystem::create_directory(empty);
  const auto r =
      testing::run_command("cd " + empty + " && " + std::string(CKPTCHECK_BIN) + " plan --report " +
                           dir.path() + "/report/report.json --total-steps 100000 --json 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output, nullptr, false);
}

TEST(DrillMeasurements, AProgramThatLogsNoOptionalFieldIsMeasuredFromOutside) {
  testing::TempDir dir;
  const nlohmann::json report = drill_report_of(dir, "");
  ASSERT_TRUE(report.is_object());
  expect_outside_measurements(report);
  const auto& t = report["measurements"]["timings"];
  const auto& m = report["measurements"]["memory"];
  for (const char* key : {"tokens_per_second", "data_wait_seconds_mean"}) {
    EXPECT_TRUE(t[key].is_null()) << key;  // never 0
    EXPECT_EQ(source(report, key), "not measured");
  }
  EXPECT_TRUE(m["peak_memory_bytes"].is_null());
  EXPECT_EQ(source(report, "peak_memory_bytes"), "not measured");

  const nlohmann::json plan = plan_of(dir);
  ASSERT_TRUE(plan.is_object());
  EXPECT_TRUE(begins_with(plan["sources"]["peak_memory"], "measured: resident set per rank sampled"))
      << plan["sources"].dump();
  EXPECT_TRUE(begins_with(plan["sources"]["step_seconds"], "measured")) << plan["sources"].dump();
  EXPECT_TRUE(begins_with(plan["sources"]["checkpoint_save_seconds"], "measured"));
  EXPECT_TRUE(begins_with(plan["sources"]["restore_seconds"], "measured"));
  EXPECT_EQ(plan["sources"]["data_wait_seconds"], "not measured");
  EXPECT_TRUE(begins_with(plan["sources"]["relative_speed"], "assumed"));
  EXPECT_GE(plan["accelerators"][0]["memory"]["peak_bytes"].get<double>(), kHeldBytes);
  EXPECT_DOUBLE_EQ(plan["checkpoint"]["cost_seconds"].get<double>(),
                   t["checkpoint_save_seconds"].get<double>());

  std::ifstream html(dir.path() + "/report/report.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("<th>tokens_per_second</th><td>not measured</td>"), std::string::npos);
}

TEST(DrillMeasurements, AProgramThatLogsEveryOptionalFieldIsUsedAndLabelled) {
  testing::TempDir dir;
  const nlohmann::json report = drill_report_of(dir, "--log-all --tokens 4096 --data-wait-ms 7");
  ASSERT_TRUE(report.is_object());
  expect_outside_measurements(report);
  const auto& t = report["measurements"]["timings"];
  const auto& m = report["measurements"]["memory"];
  EXPECT_EQ(m["peak_memory_bytes"].get<double>(), kHeldBytes);
  EXPECT_TRUE(begins_with(source(report, "peak_memory_bytes"), "reported by the program"));
  EXPECT_DOUBLE_EQ(t["data_wait_seconds_mean"].get<double>(), 0.007);
  EXPECT_TRUE(begins_with(source(report, "data_wait_seconds_mean"), "reported by the program"));
  EXPECT_DOUBLE_EQ(t["tokens_per_second"].get<double>(), 4096 / t["step_seconds_mean"].get<double>());
  EXPECT_TRUE(begins_with(source(report, "tokens_per_second"), "derived"));
  // peak_memory_bytes differs between runs of a program and is never compared; tokens is.
  bool tokens_compared = false;
  for (const auto& c : report["checks"]) {
    EXPECT_NE(c["name"], "metric_peak_memory_bytes");
    tokens_compared = tokens_compared || c["name"] == "metric_tokens";
  }
  EXPECT_TRUE(tokens_compared);

  const nlohmann::json plan = plan_of(dir);
  ASSERT_TRUE(plan.is_object());
  EXPECT_TRUE(begins_with(plan["sources"]["peak_memory"], "reported by the program"))
      << plan["sources"].dump();
  EXPECT_EQ(plan["accelerators"][0]["memory"]["peak_bytes"].get<double>(), kHeldBytes);
  EXPECT_TRUE(begins_with(plan["sources"]["data_wait_seconds"], "reported by the program"));
}

}  // namespace
}  // namespace ckpt
