// `ckptcheck plan` as a user runs it: the built binary on a drill report and the shipped catalog.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/drill_report_fixture.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

TEST(PlanCommand, PrintsOneJsonObjectForTheShippedCatalog) {
  testing::TempDir dir;
  const std::string report = dir.write("report.json", drill_report().dump());
  const std::string catalog = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/hardware.yaml";
  const testing::CommandResult r = testing::run_ckptcheck(
      "plan --report " + report + " --total-steps 1000 --catalog " + catalog + " --download-hours 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto plan = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(plan.is_object()) << r.output;
  EXPECT_NEAR(plan["checkpoint"]["interval_seconds"].get<double>(), 3219.938, 1e-3);
  ASSERT_EQ(plan["accelerators"].size(), 4u);
  const auto& h100 = plan["accelerators"][1];
  EXPECT_EQ(h100["name"], "H100 80GB");
  EXPECT_EQ(h100["memory"]["strategy"], "fsdp");  // 90.2 GiB replica > 79.6 GiB
  EXPECT_EQ(h100["memory"]["fsdp_devices"], 2);
  EXPECT_EQ(h100["budget_hours"]["download"], 1.0);                 // the flag overrides the catalog's 6
  EXPECT_EQ(h100["budget_hours"]["preprocess"], 12.0);              // the catalog's default
  EXPECT_EQ(plan["accelerators"][2]["memory"]["strategy"], "ddp");  // H200
}

TEST(PlanCommand, MissingFieldExitsTwoNamingIt) {
  testing::TempDir dir;
  nlohmann::json report = drill_report();
  report["measurements"]["timings"].erase("step_seconds_mean");
  const std::string path = dir.write("report.json", report.dump());
  const testing::CommandResult r =
      testing::run_ckptcheck("plan --report " + path + " --total-steps 10 --catalog " +
                             std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/hardware.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("step_seconds_mean"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
