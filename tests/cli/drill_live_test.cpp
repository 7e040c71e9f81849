// `drill --live`: a real training program (examples/pytorch/train.py) trains with retention on
// (it deletes all but its last 2 checkpoints) while the drill snapshots its newest checkpoint,
// resumes from it and compares with the live run's own log and final checkpoint. The live run must
// finish unharmed, its log and checkpoint dir untouched; every resume bug of the example must fail
// the drill naming the metric; JUnit and the history are checked by parsing them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/process/child_process.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

using testing::kExampleTrainScript;

class LiveDrill : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built"; }

  // The live run: `steps` steps, a checkpoint every 4, the last 2 kept; `step_sleep` slows it down.
  ChildProcess start_live_run(int steps, double step_sleep) {
    SpawnOptions spawn;
    spawn.argv = {"/usr/bin/python3", kExampleTrainScript,       "--keep-last", "2",
                  "--step-sleep",     std::to_string(step_sleep)};
    spawn.env = {"CKPTCHECK_CKPT_DIR=" + ckpt_dir(), "CKPTCHECK_STEPS=" + std::to_string(steps),
                 "CKPTCHECK_SAVE_EVERY=4", "CKPTCHECK_METRICS=" + metrics()};
    spawn.unset_env = {"CKPTCHECK_RESUME"};
    spawn.stdout_log = live_ / "stdout.log";
    spawn.stderr_log = live_ / "stderr.log";
    auto child = ChildProcess::spawn(spawn);
    EXPECT_TRUE(child.is_ok()) << child.status().to_string();
    return std::move(*child);
  }
  void run_live_to_the_end(int steps) {
    ChildProcess live = start_live_run(steps, 0);
    const ChildExit e = live.wait(300);
    ASSERT_TRUE(e.ok()) << e.describe() << read_text_file(live_ / "stderr.log");
  }
  CommandResult drill(const std::string& options, const std::string& program_args = "") {
    return run_ckptcheck("drill --live " + metrics() + " --work-dir " + work_.path() + " " + options +
                         " -- /usr/bin/python3 " + kExampleTrainScript + " " + program_args + " 2>&1");
  }
  std::string ckpt_dir() const { return live_ / "ckpt"; }
  std::string metrics() const { return live_ / "metrics.jsonl"; }
  TempDir live_, work_, out_;
};

TEST_F(LiveDrill, PassesWhileTheRunTrainsAndLeavesTheRunUntouched) {
  ChildProcess live = start_live_run(100, 0.05);
  // The drill starts once the live run has announced a checkpoint.
  const auto start = std::chrono::steady_clock::now();
  while (read_text_file(metrics()).find("\"event\"") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120))
        << read_text_file(live_ / "stderr.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const CommandResult r = drill("--junit " + out_ / "junit.xml" + " --history " + out_ / "history.jsonl" +
                                " --report-dir " + out_ / "report");
  EXPECT_TRUE(live.running()) << "the live run ended before the drill did: not a drill of a live run";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS: resumed runs match the live run bit for bit"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("hard linked"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("components match"), std::string::npos)
      << "the live final checkpoint was compared\n"
      << r.output;

  // The live run finishes unharmed: every step logged once, in order, and only its own two
  // newest checkpoints in its dir (no drill file, no lock).
  const ChildExit e = live.wait(300);
  ASSERT_TRUE(e.ok()) << e.describe() << read_text_file(live_ / "stderr.log");
  std::istringstream lines(read_text_file(metrics()));
  int expected = 1;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"event\"") != std::string::npos) continue;
    EXPECT_NE(line.find("\"step\": " + std::to_string(expected) + ","), std::string::npos) << line;
    ++expected;
  }
  EXPECT_EQ(expected, 101);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(ckpt_dir()))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"step_100", "step_96"}));

  // JUnit: well-formed, one testcase per check, no failure. History: one line, parsed back.
  const CommandResult junit = run_command(
      "/usr/bin/python3 -c \"import xml.etree.ElementTree as E; s=E.parse('" + out_ / "junit.xml" +
      "').getroot().find('testsuite'); print(s.get('name'), s.get('tests'), s.get('failures'), "
      "len(s.findall('testcase')), len(s.findall('testcase/failure')))\"");
  ASSERT_EQ(junit.exit_code, 0) << junit.output;
  std::istringstream counts(junit.output);
  std::string suite;
  int tests = 0, failures = -1, testcases = 0, failure_elements = -1;
  counts >> suite >> tests >> failures >> testcases >> failure_elements;
  EXPECT_EQ(suite, "ckptcheck.drill.live");
  EXPECT_GE(tests, 8);
  EXPECT_EQ(testcases, tests);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(failure_elements, 0);
  const std::string history = read_text_file(out_ / "history.jsonl");
  ASSERT_EQ(std::count(history.begin(), history.end(), '\n'), 1) << history;
  const auto entry = nlohmann::json::parse(history);
  EXPECT_EQ(entry["verdict"], "pass");
  EXPECT_EQ(entry["mode"], "live");
  EXPECT_GT(entry["checkpoint_bytes"].get<double>(), 0);
  EXPECT_GT(entry["restore_seconds"].get<double>(), 0);
  EXPECT_EQ(entry["max_abs"]["loss"].get<double>(), 0);
  EXPECT_NE(read_text_file(out_ / "report/report.html").find("id=\"trend-restore_seconds\""),
            std::string::npos);
}

TEST_F(LiveDrill, EveryResumeBugOfTheExampleFailsNamingTheMetric) {
  run_live_to_the_end(24);  // a finished run: yesterday's log and checkpoints are the golden values
  for (const std::string bug :
       {"forget-optimizer", "forget-scheduler", "forget-rng", "forget-data-position", "forget-scaler"}) {
    const std::string junit = out_ / (bug + ".xml");
    const CommandResult r =
        drill("--junit " + junit + " --history " + out_ / "history.jsonl", "--bug " + bug);
    EXPECT_EQ(r.exit_code, 1) << bug << "\n" << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex("FAIL: [a-z_]+ diverged at step [0-9]+: reference")))
        << bug << "\n"
        << r.output;
    const CommandResult parsed = run_command(
        "/usr/bin/python3 -c \"import xml.etree.ElementTree as E; s=E.parse('" + junit +
        "').getroot().find('testsuite'); f=s.findall('testcase/failure'); print(s.get('failures'), len(f), "
        "f[0].get('message'))\"");
    ASSERT_EQ(parsed.exit_code, 0) << parsed.output;
    EXPECT_NE(parsed.output.find("diverged at step"), std::string::npos) << bug << ": " << parsed.output;
    EXPECT_EQ(parsed.output.substr(0, 1) == "0", false) << parsed.output;
  }
  // Five drills, five history lines, five fail verdicts.
  std::istringstream lines(read_text_file(out_ / "history.jsonl"));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n)
    EXPECT_EQ(nlohmann::json::parse(line)["verdict"], "fail");
  EXPECT_EQ(n, 5);
}

TEST_F(LiveDrill, TheNightlyScriptDrillsAFinishedRunFromItsNewestCheckpointWithStepsAfterIt) {
  run_live_to_the_end(24);  // retention left step_20 and step_24; 24 is the last step
  const CommandResult r = run_command("OUT=" + out_.path() + " CKPTCHECK=" + CKPTCHECK_BIN + " " +
                                      CKPTCHECK_SOURCE_DIR + "/examples/ci/nightly-drill.sh " + live_.path() +
                                      " -- /usr/bin/python3 " + kExampleTrainScript + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("N=20 K=4"), std::string::npos) << r.output;
  EXPECT_NE(read_text_file(out_ / "junit.xml").find("failures=\"0\""), std::string::npos);
  EXPECT_NE(read_text_file(out_ / "history.jsonl").find("\"verdict\":\"pass\""), std::string::npos);
  EXPECT_NE(read_text_file(out_ / "report/report.html").find("id=\"history\""), std::string::npos);
}

TEST_F(LiveDrill, ACheckpointTheRunsRetentionDeletedIsAClearError) {
  run_live_to_the_end(24);
  const CommandResult r = drill("--checkpoint " + ckpt_dir() + "/step_8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("step 8: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("deleted?"), std::string::npos) << r.output;
}

TEST_F(LiveDrill, ARunThatNeverReachesNPlusKTimesOut) {
  run_live_to_the_end(24);
  const CommandResult r = drill("--checkpoint " + ckpt_dir() + "/step_20 --resume-steps 8 --wait-timeout 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is at step 24: it did not reach step 28 within 2 s"), std::string::npos)
      << r.output;
}

TEST_F(LiveDrill, OptionsThatDoNotApplyToALiveRunAreRefused) {
  run_live_to_the_end(8);
  // (--resume-nproc applies: the live run on --nproc-per-node ranks, resumed on another world size.)
  for (const std::string options : {"--save-at 4", "--kill during-save"}) {
    const CommandResult r = drill(options);
    EXPECT_EQ(r.exit_code, 2) << options << "\n" << r.output;
    EXPECT_NE(r.output.find("not apply to --live"), std::string::npos) << options << "\n" << r.output;
  }
}

}  // namespace
}  // namespace ckpt
