// Runs the real drill through the binary: children are trained, SIGKILLed and resumed for real.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::kPilotConfig;
const std::string kLongRun = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs/long-run.yaml";

// The drill verifies through `ckptcheck verify --json`: a binary whose verify is broken fails these
// tests (never skips them).
bool verify_registered() {
  static const bool registered = testing::run_ckptcheck("verify --help").exit_code == 0;
  return registered;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(Drill, ActivationCheckpointingResumesBitIdentically) {
  // Recompute in backward replays the RNG: a SIGKILLed run with it on still resumes bit for bit.
  ASSERT_TRUE(verify_registered()) << "`ckptcheck verify --help` fails: the binary under test is broken";
  testing::TempDir tmp;
  // The pilot with recompute switched on. pilot-activations.yaml also turns it on, but its geometry
  // is sized for the memory matrix (`pilot --matrix`) and a drill of it costs 24 s of CPU against 9.
  std::string config = testing::read_text_file(kPilotConfig);
  const std::string corpus = "path: ../data/corpus.txt";
  ASSERT_NE(config.find(corpus), std::string::npos) << kPilotConfig;
  config.replace(config.find(corpus), corpus.size(),
                 "path: " + std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/data/corpus.txt");
  std::ofstream(tmp / "pilot-recompute.yaml") << config << "activation_checkpointing: blocks\n";
  const auto r = testing::run_ckptcheck("drill --config " + (tmp / "pilot-recompute.yaml") +
                                        " --report-dir " + (tmp / "report") + " --work-dir " + tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json report = testing::read_json_file(tmp / "report/report.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["bit_identical"], true);
  EXPECT_EQ(report["config"]["activation_checkpointing"], "blocks");
}

TEST(Drill, PilotResumesBitIdenticallyAfterBothKills) {
  ASSERT_TRUE(verify_registered()) << "`ckptcheck verify --help` fails: the binary under test is broken";
  testing::TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  // As `make demo` runs it: a relative --work-dir. The subject then announces paths under a
  // relative CKPTCHECK_CKPT_DIR, which doubled the dir when joined to it (before the work dir was
  // made absolute).
  const auto r = testing::run_command("cd " + tmp.path() + " && CKPTCHECK_NO_PROGRESS=1 " + CKPTCHECK_BIN +
                                      " drill --config " + kPilotConfig +
                                      " --kill both --report-dir report --work-dir demo-work");
  std::printf("[ timing ] full pilot drill, both kills: %.1f s\n", seconds_since(start));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos);

  const nlohmann::json report = testing::read_json_file(tmp / "report/report.json");
  ASSERT_TRUE(report.is_object()) << "report.json does not parse";
  EXPECT_EQ(report["verdict"], "pass");
  EXPECT_EQ(report["bit_identical"], true);
  EXPECT_EQ(report["drill"]["save_at"], 8);  // config steps 16 / 2
  ASSERT_EQ(report["modes"].size(), 2u);
  EXPECT_EQ(report["modes"][0]["resumed_from_step"], 8);
  EXPECT_EQ(report["modes"][1]["resumed_from_step"], 4);  // the torn step-8 save is skipped
  for (const char* c : {"model", "optimizer", "scheduler", "scaler", "rng", "data", "progress"}) {
    ASSERT_TRUE(report["components"].contains(c)) << c;
    EXPECT_EQ(report["components"][c]["bit_identical"], true) << c;
  }
  bool saw_torn = false;
  for (const auto& c : report["checks"]) {
    EXPECT_EQ(c["passed"], true) << c.dump();
    if (c["name"] == "torn_checkpoint_uncommitted") saw_torn = true;
  }
  EXPECT_TRUE(saw_torn);
  EXPECT_EQ(report["losses"]["reference"].size(), 16u);
  EXPECT_EQ(report["losses"]["resumed"].size(), 8u);

  const auto& memory = report["measurements"]["memory"];
  EXPECT_GT(memory["peak_rss_bytes"].get<double>(), 0);
  EXPECT_GT(memory["parameter_bytes"].get<double>(), 0);
  EXPECT_GT(memory["gradient_bytes"].get<double>(), 0);
  EXPECT_GT(memory["optimizer_state_bytes"].get<double>(),
            0);  // the measured step includes the optimizer step
  EXPECT_TRUE(memory["cuda"].is_null());
  const auto& timings = report["measurements"]["timings"];
  for (const char* k :
       {"step_seconds_mean", "forward_backward_seconds_mean", "optimizer_seconds_mean",
        "checkpoint_save_seconds", "checkpoint_bytes", "restore_seconds", "verify_seconds",
        "process_start_seconds", "tokens_per_second", "eval_seconds", "data_wait_seconds_mean"})
    ASSERT_TRUE(timings.contains(k)) << k;
  EXPECT_GT(timings["checkpoint_bytes"].get<double>(), 0);
  EXPECT_GT(timings["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(timings["restore_seconds"].get<double>(), 0);
  EXPECT_EQ(report["measurements"]["eval_every_steps"], 0);
  EXPECT_FALSE(report["pins"].empty());

  std::ifstream html(tmp / "report/report.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("id=\"curve-reference\""), std::string::npos);
  EXPECT_NE(page.str().find("id=\"curve-resumed-during-save\""), std::string::npos);

  // The report is what `plan` plans from: the two must agree on its shape.
  const auto plan = testing::run_ckptcheck("plan --report " + (tmp / "report/report.json") +
                                           " --total-steps 100000 --catalog " + CKPTCHECK_SOURCE_DIR +
                                           "/fixtures/hardware.yaml --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("H100"), std::string::npos) << plan.output;
}

struct InjectCase {
  const char* inject;
  const char* must_name;  // in the failure message
};

class DrillInject : public ::testing::TestWithParam<InjectCase> {};

TEST_P(DrillInject, FailsNamingTheComponentThatDiverged) {
  ASSERT_TRUE(verify_registered()) << "`ckptcheck verify --help` fails: the binary under test is broken";
  testing::TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  const auto r = testing::run_ckptcheck("drill --config " + kPilotConfig +
                                        " --save-at 4 --resume-steps 4 --inject " + GetParam().inject +
                                        " --work-dir " + tmp.path() + " --report-dir " + (tmp / "report"));
  std::printf("[ timing ] inject %s: %.1f s\n", GetParam().inject, seconds_since(start));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(std::string("FAIL: ") + GetParam().must_name), std::string::npos) << r.output;
  const nlohmann::json report = testing::read_json_file(tmp / "report/report.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["verdict"], "fail");
  EXPECT_EQ(report["bit_identical"], false);
}

INSTANTIATE_TEST_SUITE_P(NegativeControls, DrillInject,
                         ::testing::Values(InjectCase{"drop-optimizer-state", "optimizer diverged"},
                                           InjectCase{"reset-scheduler", "scheduler diverged"},
                                           InjectCase{"skip-rng-restore", "rng diverged"},
                                           InjectCase{"skip-data-position", "data diverged"},
                                           InjectCase{"reset-loss-scaler", "scaler diverged"},
                                           InjectCase{
                                               "stale-shard",
                                               "verify failed on step_00000004: shard shard-00000-of-00002"}),
                         [](const ::testing::TestParamInfo<InjectCase>& info) {
                           return testing::gtest_param_name(info.param.inject);
                         });

TEST(Drill, StaleShardNamesTheComponentsInTheShard) {
  ASSERT_TRUE(verify_registered()) << "`ckptcheck verify --help` fails: the binary under test is broken";
  testing::TempDir tmp;
  const auto r = testing::run_ckptcheck("drill --config " + kPilotConfig +
                                        " --save-at 2 --resume-steps 1 --inject stale-shard"
                                        " --shards 1 --work-dir " +
                                        tmp.path());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // With one shard every tensor is in it, so every component is named.
  EXPECT_NE(r.output.find("holds data, model, optimizer, progress, rng, scaler, scheduler tensors"),
            std::string::npos)
      << r.output;
}

TEST(Drill, RefusesAPilotThatHidesTheLongRunsMemory) {
  const auto r = testing::run_ckptcheck("drill --config " + kPilotConfig + " --long-run " + kLongRun);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("seq_len: pilot 64 < long run 256"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("micro_batch: pilot 8 < long run 16"), std::string::npos) << r.output;
}

TEST(Drill, BadFlagsAreUsageErrors) {
  EXPECT_EQ(testing::run_ckptcheck("drill --config " + kPilotConfig + " --kill sideways").exit_code, 2);
  const auto unknown =
      testing::run_ckptcheck("drill --config " + kPilotConfig + " --inject forget-everything");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("forget-everything"), std::string::npos) << unknown.output;
  const auto odd =
      testing::run_ckptcheck("drill --config " + kPilotConfig + " --kill during-save --save-at 3");
  EXPECT_EQ(odd.exit_code, 2);
  EXPECT_NE(odd.output.find("even"), std::string::npos) << odd.output;
  EXPECT_EQ(testing::run_ckptcheck("drill --config /nonexistent.yaml").exit_code, 2);
}

}  // namespace
}  // namespace ckpt
