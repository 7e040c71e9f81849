// `drill -- PROGRAM` on a program whose checkpoint is one torch.save file per save
// (tests/data/programs/torch_file_program.py): saved by ckptcheck.torch.save (sealed beside it) and
// loaded by ckptcheck.torch.load (verified first), it refuses every fault, and its torn save is
// exercised; with a resume bug, the report's headline names the cause before the diverging metrics.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace drill_torch_file_test {

namespace fs = std::filesystem;

const std::string kProgram = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/torch_file_program.py";

testing::CommandResult drill(const std::string& options, const std::string& program_args = "") {
  const std::string python_dir = (fs::path(CKPTCHECK_BIN).parent_path() / "python").string();
  return testing::run_command("PYTHONPATH=" + python_dir + " " + CKPTCHECK_BIN +
                              " drill --save-at 4 --resume-steps 4 " + options +
                              " --json -- /usr/bin/python3 " + kProgram + " " + program_args);
}

nlohmann::json report_of(const testing::CommandResult& r) {
  const size_t start = r.output.find("{\n");
  if (start == std::string::npos) return nlohmann::json();
  const size_t end = r.output.rfind("\n}");
  return nlohmann::json::parse(r.output.substr(start, end + 2 - start), nullptr, false);
}

const nlohmann::json& check_of(const nlohmann::json& report, const std::string& name,
                               const std::string& mode) {
  static const nlohmann::json none;
  for (const auto& c : report["checks"])
    if (c["name"] == name && c["mode"] == mode) return c;
  ADD_FAILURE() << "no check " << name << " (" << mode << "): " << report["checks"].dump();
  return none;
}

// Items 1 and 2 of issue 66: the fault copies carry the seal, so the stale file is refused (not a
// silent match) and the bit flip is refused by the seal; the during-save kill lands inside the
// step-4 save, never at the creation of the step-2 file's seal.
TEST(DrillTorchFile, ASealedSingleFileRefusesEveryFaultAndItsTornSaveIsExercised) {
  const auto r = drill("--kill both --faults bitflip,truncate,stale-file");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  std::map<std::string, std::string> outcome, detail;
  for (const auto& f : report["faults"]) {
    outcome[f["fault"]] = f["outcome"];
    detail[f["fault"]] = f["detail"];
  }
  for (const char* fault : {"bitflip", "truncate", "stale-file"})
    EXPECT_EQ(outcome[fault], "refused") << fault << ": " << report["faults"].dump();
  EXPECT_NE(detail["bitflip"].find("seal"), std::string::npos) << detail["bitflip"];
  const auto& landed = check_of(report, "kill_landed_during_save", "during-save");
  EXPECT_TRUE(landed["passed"].get<bool>()) << landed.dump();
  const std::string trigger = landed["numbers"]["trigger"].get<std::string>();
  EXPECT_EQ(trigger.find(".ckptcheck.seal.json"), std::string::npos) << trigger;
  EXPECT_NE(trigger.find("step_4.pt"), std::string::npos) << trigger;
  EXPECT_EQ(check_of(report, "resumed_from", "during-save")["numbers"]["expected_step"], 2) << r.output;
}

// Items 5 and 6 of issue 66: the report leads with one cause, before the diverging metrics.
TEST(DrillTorchFile, TheHeadlineNamesAMissingOptimizerFromVerifysJudgement) {
  const auto r = drill("--kill after-save", "--bug forget-optimizer-save");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  const auto& state = check_of(report, "resume_state", "after-save");
  EXPECT_TRUE(state["skipped"].get<bool>()) << state.dump();
  ASSERT_TRUE(report["headline"].is_string()) << report.dump();
  EXPECT_NE(report["headline"].get<std::string>().find("optimizer_state_missing"), std::string::npos)
      << report["headline"];
  const auto& final_state = check_of(report, "final_state", "after-save");
  EXPECT_EQ(final_state["detail"].get<std::string>().find("all bit-exact"), std::string::npos)
      << final_state.dump();
  EXPECT_NE(r.output.find("CAUSE: the checkpoint resumed from lacks state"), std::string::npos) << r.output;
}

TEST(DrillTorchFile, TheHeadlineNamesAnOptimizerSavedButNotRestoredByItsStepCount) {
  const auto r = drill("--kill after-save", "--bug forget-optimizer-load");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  ASSERT_TRUE(report["headline"].is_string()) << report.dump();
  const std::string h = report["headline"];
  EXPECT_EQ(h.rfind("optimizer not restored: its step count optimizer.state.0.step is 4", 0), 0u) << h;
  EXPECT_NE(h.find("where the reference's is 8"), std::string::npos) << h;
}

TEST(DrillTorchFile, AProgramThatIgnoresItsResumeIsToldItStartedFromScratch) {
  const auto r = drill("--kill after-save", "--bug ignore-resume");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  ASSERT_TRUE(report["headline"].is_string()) << report.dump();
  EXPECT_EQ(
      report["headline"].get<std::string>().rfind("started from scratch: first logged step 1, expected 5", 0),
      0u)
      << report["headline"];
}

}  // namespace drill_torch_file_test
}  // namespace ckpt
