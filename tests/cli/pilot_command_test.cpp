// `ckptcheck pilot` through the built binary: real training children, measured for real.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

const std::string kConfigs = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs/";

const nlohmann::json* variant(const nlohmann::json& matrix, const std::string& name) {
  for (const auto& v : matrix["variants"]) {
    if (v["name"] == name) return &v;
  }
  return nullptr;
}

TEST(PilotCommand, MatrixMeasuresFourVariantsAndRecomputeSavesMemoryBitExactly) {
  testing::TempDir tmp;
  const auto r =
      testing::run_ckptcheck("pilot --config " + kConfigs + "pilot-activations.yaml --matrix --steps 3" +
                             " --report-dir " + (tmp / "report") + " --work-dir " + tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fp32+ac"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Activation checkpointing (fp32)"), std::string::npos) << r.output;
  const nlohmann::json report = testing::read_json_file(tmp / "report/report.json");
  ASSERT_TRUE(report.is_object());
  const nlohmann::json& m = report["matrix"];
  ASSERT_EQ(m["variants"].size(), 4u);
  for (const auto& v : m["variants"]) {
    EXPECT_GT(v["step_memory_bytes"].get<double>(), 0) << v.dump();
    EXPECT_GT(v["step_seconds"].get<double>(), 0) << v.dump();
    EXPECT_GT(v["tokens_per_second"].get<double>(), 0) << v.dump();
    EXPECT_EQ(v["vs_fp32"]["steps_compared"], 3) << v.dump();
  }
  // Recompute: less memory in the measured peak of a full step, the same bits.
  for (const std::string p : {"fp32", "bf16"}) {
    const nlohmann::json* off = variant(m, p);
    const nlohmann::json* on = variant(m, p + "+ac");
    ASSERT_TRUE(off && on);
    EXPECT_LT((*on)["step_memory_bytes"].get<double>(), (*off)["step_memory_bytes"].get<double>()) << p;
    EXPECT_EQ((*on)["eval_logits_sha256"], (*off)["eval_logits_sha256"]) << p;
  }
  EXPECT_TRUE((*variant(m, "fp32+ac"))["vs_fp32"]["bit_identical"].get<bool>());
  // bf16 autocast really ran: other numbers, close to fp32's.
  const nlohmann::json& bf16 = (*variant(m, "bf16"))["vs_fp32"];
  EXPECT_FALSE(bf16["bit_identical"].get<bool>());
  EXPECT_GT(bf16["loss_max_relative_difference"].get<double>(), 0);
  EXPECT_LT(bf16["loss_max_relative_difference"].get<double>(), 0.05);
  EXPECT_TRUE(m["passed"].get<bool>());
  const std::string html = testing::read_text_file(tmp / "report/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("step memory"), std::string::npos);
}

TEST(PilotCommand, ATightLossToleranceFailsTheBf16CheckWithExitOne) {
  testing::TempDir tmp;
  const auto r = testing::run_ckptcheck("pilot --config " + kConfigs + "pilot.yaml --matrix --steps 2" +
                                        " --loss-rtol 0 --json --work-dir " + tmp.path());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("\"bf16 numerics\""), std::string::npos) << r.output;
}

TEST(PilotCommand, ScalingMeasuresWorldSizesAndPlanModelsThem) {
  testing::TempDir tmp;
  const auto r =
      testing::run_ckptcheck("pilot --config " + kConfigs + "pilot-ddp.yaml --scaling 1,2 --steps 3" +
                             " --report-dir " + (tmp / "report") + " --work-dir " + tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json report = testing::read_json_file(tmp / "report/report.json");
  const nlohmann::json& sc = report["scaling"];
  ASSERT_EQ(sc["runs"].size(), 2u);
  EXPECT_GT(sc["gradient_bytes"].get<double>(), 0);
  EXPECT_EQ(sc["runs"][1]["world_size"], 2);
  EXPECT_GT(sc["runs"][1]["timings"]["communication_seconds_mean"].get<double>(), 0);
  ASSERT_TRUE(sc.contains("model")) << sc.dump();
  ASSERT_EQ(sc["validation"].size(), 2u);
  EXPECT_TRUE(sc["validation"][1]["calibration"].get<bool>());

  // plan reads the pilot's report and gives a curve per accelerator of the catalog.
  const std::string drill_report = tmp / "drill.json";
  {
    std::ofstream out(drill_report);
    out << nlohmann::json{{"measurements",
                           {{"memory",
                             {{"peak_rss_bytes", 1e9},
                              {"parameter_bytes", 1e8},
                              {"gradient_bytes", 1e8},
                              {"optimizer_state_bytes", 2e8},
                              {"activation_bytes_estimate", 1e8}}},
                            {"timings",
                             {{"step_seconds_mean", 0.5},
                              {"data_wait_seconds_mean", 0.01},
                              {"eval_seconds", 1},
                              {"checkpoint_save_seconds", 2},
                              {"checkpoint_bytes", 4e8},
                              {"restore_seconds", 1},
                              {"tokens_per_second", 1000}}},
                            {"eval_every_steps", 0}}}}
               .dump();
  }
  const auto plan = testing::run_ckptcheck(
      "plan --report " + drill_report + " --total-steps 1000 --catalog " + std::string(CKPTCHECK_SOURCE_DIR) +
      "/fixtures/hardware.yaml --scaling " + (tmp / "report/report.json") + " --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto j = nlohmann::json::parse(plan.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << plan.output;
  ASSERT_TRUE(j.contains("scaling"));
  for (const auto& a : j["accelerators"]) {
    ASSERT_TRUE(a["scaling"]["modelled"].get<bool>()) << a.dump();
    EXPECT_GE(a["scaling"]["stops_paying_after"].get<int>(), 1);
    EXPECT_DOUBLE_EQ(a["scaling"]["points"][0]["efficiency"].get<double>(), 1.0);
  }
  const auto table = testing::run_ckptcheck(
      "plan --report " + drill_report + " --total-steps 1000 --catalog " + std::string(CKPTCHECK_SOURCE_DIR) +
      "/fixtures/hardware.yaml --scaling " + (tmp / "report/report.json"));
  EXPECT_NE(table.output.find("stops paying after"), std::string::npos) << table.output;
}

TEST(PilotCommand, NothingToMeasureAndBadWorldSizesAreUsageErrors) {
  EXPECT_EQ(testing::run_ckptcheck("pilot --config " + kConfigs + "pilot.yaml").exit_code, 2);
  const auto r = testing::run_ckptcheck("pilot --config " + kConfigs + "pilot-ddp.yaml --scaling 1,5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("not divisible by world size 5"), std::string::npos) << r.output;
  const auto fsdp = testing::run_ckptcheck("pilot --config " + kConfigs + "pilot-fsdp.yaml --scaling 1,2");
  EXPECT_EQ(fsdp.exit_code, 2);
  EXPECT_NE(fsdp.output.find("models data parallelism (ddp)"), std::string::npos) << fsdp.output;
}

}  // namespace
}  // namespace ckpt
