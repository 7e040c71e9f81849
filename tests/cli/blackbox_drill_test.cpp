// `ckptcheck drill -- COMMAND`: the drill on a real PyTorch program (examples/pytorch/train.py, run
// by Debian's python3-torch), through the contract alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::kExampleTrainScript;

testing::CommandResult drill(const std::string& options, const std::string& program_args = "") {
  return testing::run_ckptcheck("drill --save-at 4 --resume-steps 4 " + options +
                                " --json -- /usr/bin/python3 " + kExampleTrainScript + " " + program_args);
}

nlohmann::json report_of(const testing::CommandResult& r) {
  const size_t start = r.output.find("{\n");
  if (start == std::string::npos) return nlohmann::json();
  const size_t end = r.output.rfind("\n}");
  return nlohmann::json::parse(r.output.substr(start, end + 2 - start), nullptr, false);
}

bool check_passed(const nlohmann::json& report, const std::string& name, const std::string& mode) {
  for (const auto& c : report["checks"])
    if (c["name"] == name && c["mode"] == mode) return c["passed"].get<bool>();
  ADD_FAILURE() << "no check " << name << " (" << mode << ")";
  return false;
}

TEST(BlackBoxDrill, PytorchProgramPassesBothKillModesBitExactly) {
  const auto r = drill("--kill both");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  EXPECT_TRUE(report["bit_identical"].get<bool>());
  for (const char* mode : {"after-save", "during-save"}) {
    EXPECT_TRUE(check_passed(report, "checkpoint_readable", mode));
    EXPECT_TRUE(check_passed(report, "resumed_from", mode));
    EXPECT_TRUE(check_passed(report, "final_state", mode));
  }
  // Every component of the program's checkpoint directory was compared, by file.
  for (const char* component : {"model", "optimizer", "scheduler", "scaler", "rng", "data", "progress"})
    EXPECT_TRUE(report["components"].contains(component)) << component << ": " << report["components"].dump();
}

TEST(BlackBoxDrill, TerminalShowsPhaseAndTheChildsLastStepPipedStaysQuiet) {
  const std::string drill_line =
      std::string(CKPTCHECK_BIN) +
      " drill --save-at 4 --resume-steps 4 --kill after-save -- /usr/bin/python3 " + kExampleTrainScript;
  // script(1) gives the drill a terminal on stderr; CKPTCHECK_NO_PROGRESS is left unset in both runs.
  const auto tty =
      testing::run_command("env -u CKPTCHECK_NO_PROGRESS script -qec '" + drill_line + "' /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  // The subject's phase is always shown; its step line only when a progress tick falls before the
  // kill, which a loaded 2-core machine can miss (the resumed run's last step is checked below).
  EXPECT_NE(tty.output.find("[drill: subject (after-save)"), std::string::npos) << tty.output;
  EXPECT_NE(tty.output.find("[drill: resumed run (after-save), step] 8/8"), std::string::npos) << tty.output;
  const auto piped = testing::run_command("env -u CKPTCHECK_NO_PROGRESS " + drill_line + " 2>&1 | cat");
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find("\r\033[K"), std::string::npos) << piped.output;
  EXPECT_EQ(piped.output.find("[drill: "), std::string::npos) << piped.output;
}

TEST(BlackBoxDrill, SingleFileCheckpointsPassToo) {
  const auto r = drill("--kill after-save", "--single-file");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(report_of(r)["components"].contains("optimizer")) << r.output;
}

// Each classic resume bug fails the drill and the report names the component that lost its state.
TEST(BlackBoxDrill, EveryResumeBugIsCaughtAndNamed) {
  const std::pair<const char*, const char*> bugs[] = {{"forget-optimizer", "optimizer diverged"},
                                                      {"forget-scheduler", "scheduler diverged"},
                                                      {"forget-rng", "rng diverged"},
                                                      {"forget-data-position", "data diverged"},
                                                      {"forget-scaler", "scaler diverged"}};
  for (const auto& [bug, named] : bugs) {
    const auto r = drill("--kill after-save", std::string("--bug ") + bug);
    EXPECT_EQ(r.exit_code, 1) << bug << ": " << r.output;
    EXPECT_NE(r.output.find(named), std::string::npos) << bug << ": " << r.output;
  }
}

TEST(BlackBoxDrill, FaultsAreClassified) {
  const auto r = drill("--faults truncate,bitflip,drop-file,stale-file");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // a plain torch.save program accepts a flipped byte silently
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  std::map<std::string, std::string> outcome;
  for (const auto& f : report["faults"]) outcome[f["fault"]] = f["outcome"];
  EXPECT_EQ(outcome["truncate"], "refused");
  EXPECT_EQ(outcome["drop-file"], "refused");
  EXPECT_EQ(outcome["bitflip"], "silent-divergence");
  EXPECT_EQ(outcome["stale-file"], "silent-divergence");
  EXPECT_NE(r.output.find("would have been caught by"), std::string::npos) << r.output;
}

// examples/pytorch/train_contract.py keeps the contract through ckptcheck.contract and saves and loads
// through ckptcheck.torch (sealed on save, verified before torch.load): its drill passes, and every
// damaged copy is refused before a step is trained from it.
TEST(BlackBoxDrill, ProgramOnThePythonPackageRefusesEveryFault) {
  const std::string python_dir = (std::filesystem::path(CKPTCHECK_BIN).parent_path() / "python").string();
  const auto r = testing::run_command("PYTHONPATH=" + python_dir + " " + CKPTCHECK_BIN +
                                      " drill --save-at 4 --resume-steps 4 --kill after-save --faults "
                                      "bitflip,truncate,stale-file --json -- /usr/bin/python3 " +
                                      CKPTCHECK_SOURCE_DIR + "/examples/pytorch/train_contract.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = report_of(r);
  ASSERT_TRUE(report.is_object()) << r.output;
  EXPECT_TRUE(report["bit_identical"].get<bool>());
  std::map<std::string, std::string> outcome;
  for (const auto& f : report["faults"]) outcome[f["fault"]] = f["outcome"];
  for (const char* fault : {"bitflip", "truncate", "stale-file"})
    EXPECT_EQ(outcome[fault], "refused") << fault << ": " << report["faults"].dump();
}

TEST(BlackBoxDrill, ControlRunMeasuresNoNoiseForADeterministicProgram) {
  const auto r = drill("--control");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = report_of(r);
  bool found = false;
  for (const auto& c : report["checks"])
    if (c["name"] == "control_envelope") {
      found = true;
      EXPECT_TRUE(c["numbers"]["bit_identical"].get<bool>()) << c.dump();
    }
  EXPECT_TRUE(found) << r.output;
}

TEST(BlackBoxDrill, AProgramThatNeverAnnouncesACheckpointIsAnError) {
  const auto r = testing::run_ckptcheck(
      "drill --save-at 2 --child-timeout 20 -- /bin/sh -c 'echo {\"step\": 1, \"loss\": 1} >> "
      "\"$CKPTCHECK_METRICS\"'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("never reached its kill point"), std::string::npos) << r.output;
}

TEST(BlackBoxDrill, ConfigAndCommandTogetherAreAUsageError) {
  const auto r = testing::run_ckptcheck("drill --config x.yaml -- /bin/true");
  EXPECT_EQ(r.exit_code, 2);
  const auto none = testing::run_ckptcheck("drill -- /bin/true");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("--save-at"), std::string::npos) << none.output;
}

}  // namespace
}  // namespace ckpt
