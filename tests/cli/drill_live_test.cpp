// `drill --live`: a real training program (examples/pytorch/train.py) trains with retention on
// (it deletes all but its last 2 checkpoints) while the drill snapshots its newest checkpoint,
// resumes from it and compares with the live run's own log and final checkpoint. The live run must
// finish unharmed, its log and checkpoint dir untouched; every resume bug of the example must fail
// the drill naming the metric; JUnit and the history are checked by parsing them.
#include <gtest/gtest.h>
#include <signal.h>
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
  ChildProcess start_live_run(int steps, double step_sleep,
                              const std::vector<std::string>& args = {"--keep-last", "2"}) {
    SpawnOptions spawn;
    spawn.argv = {"/usr/bin/python3", kExampleTrainScript, "--step-sleep", std::to_string(step_sleep)};
    spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
    spawn.env = {"CKPTCHECK_CKPT_DIR=" + ckpt_dir(), "CKPTCHECK_STEPS=" + std::to_string(steps),
                 "CKPTCHECK_SAVE_EVERY=4", "CKPTCHECK_METRICS=" + metrics()};
    spawn.unset_env = {"CKPTCHECK_RESUME"};
    spawn.stdout_log = live_ / "stdout.log";
    spawn.stderr_log = live_ / "stderr.log";
    auto child = ChildProcess::spawn(spawn);
    EXPECT_TRUE(child.is_ok()) << child.status().to_string();
    return std::move(*child);
  }
  void run_live_to_the_end(int steps, const std::vector<std::string>& args = {"--keep-last", "2"}) {
    ChildProcess live = start_live_run(steps, 0, args);
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

// Issue 66 item 3: the live drill's report draws the resumed run against the live log (report.json's
// losses.resumed, the HTML's resumed curve and each "resumed - live run" chart, checked in the DOM
// headless Chromium builds) and says what happened: a snapshot resumed, nothing killed.
TEST_F(LiveDrill, TheReportDrawsTheResumedRunAgainstTheLiveLogAndKillsNothing) {
  run_live_to_the_end(24);  // retention left step_20 and step_24: N=20, K=4
  const CommandResult r = drill("--report-dir " + out_ / "report", "--bug forget-scheduler");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_text_file(out_ / "report/report.json"));
  ASSERT_EQ(report["losses"]["resumed"].size(), 4u) << report["losses"].dump();
  EXPECT_EQ(report["losses"]["resumed"][0]["step"], 21);
  EXPECT_EQ(report["losses"]["resumed_by_mode"]["live"], report["losses"]["resumed"]);
  EXPECT_FALSE(report["drill"].contains("kill")) << report["drill"].dump();
  ASSERT_EQ(report["modes"].size(), 1u);
  EXPECT_TRUE(report["modes"][0]["kill"].is_null());
  EXPECT_EQ(report["modes"][0]["resumed_from_step"], 20);
  ASSERT_FALSE(report["diverging_metrics"].empty());
  const std::string field = report["diverging_metrics"][0]["field"];
  EXPECT_EQ(report["diverging_metrics"][0]["resumed_by_mode"]["live"].size(), 4u);

  const std::string html = read_text_file(out_ / "report/report.html");
  EXPECT_NE(html.find("Live run, snapshot of step 20, resumed from it to step 24"), std::string::npos)
      << html;
  // "killed" only where it says that nothing was.
  const std::string said = std::regex_replace(html, std::regex("nothing (was )?killed"), "");
  EXPECT_EQ(said.find("killed"), std::string::npos) << html;
  EXPECT_EQ(html.find("after-save"), std::string::npos) << html;

  const char* chromium = "/usr/bin/chromium";
  if (::access(chromium, X_OK) != 0) GTEST_SKIP() << "chromium not installed at " << chromium;
  const CommandResult dom = run_command(
      std::string("timeout 60 ") + chromium +
      " --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update"
      " --disable-sync --no-first-run --user-data-dir=" +
      (out_ / "profile") + " --dump-dom file://" + (out_ / "report/report.html") + " 2>/dev/null");
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  // Points of a polyline as the browser parsed them: "x,y x,y ...".
  const auto points_of = [&](const std::string& id) {
    const std::regex polyline("<polyline id=\"" + id + "\"[^>]* points=\"([^\"]*)\"");
    std::smatch m;
    if (!std::regex_search(dom.output, m, polyline)) return -1;
    std::istringstream in(m[1].str());
    int n = 0;
    for (std::string p; in >> p; ++n) EXPECT_NE(p.find(','), std::string::npos) << id << ": " << p;
    return n;
  };
  EXPECT_EQ(points_of("curve-reference"), 4) << dom.output.substr(0, 3000);
  EXPECT_EQ(points_of("curve-resumed-live"), 4) << dom.output.substr(0, 3000);
  EXPECT_EQ(points_of("metric-" + field + "-resumed-live"), 4);
  EXPECT_EQ(points_of("diff-" + field + "-live"), 4) << "the resumed - live run chart is drawn";
  EXPECT_NE(dom.output.find("resumed from the snapshot of step 20"), std::string::npos);
  EXPECT_NE(dom.output.find("live run (its log)"), std::string::npos);
}

// Issue 66 item 4: a stale file (the step-4 checkpoint as step 8's) makes the program resume from
// step 4 and log steps 5..12, each equal to the live log's: silent-match, as a drill from scratch
// calls it, not silent-divergence (the steps before N+1 are held against the live log too).
TEST_F(LiveDrill, AStaleFileWhoseRunMatchesTheLiveLogIsASilentMatch) {
  run_live_to_the_end(12, {"--single-file"});  // step_4.pt, step_8.pt, step_12.pt: N=8, K=4
  const CommandResult r = drill("--faults stale-file --report-dir " + out_ / "report");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fault stale-file: silent-match: replaced step_8.pt by the step-4 file"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("matched the live run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("silent-divergence"), std::string::npos) << r.output;
  const auto report = nlohmann::json::parse(read_text_file(out_ / "report/report.json"));
  ASSERT_EQ(report["faults"].size(), 1u);
  EXPECT_EQ(report["faults"][0]["outcome"], "silent-match");
}

// Issue 66 item 7: a live run that crashed (its log last written two hours ago) is named at once,
// with its last step and when its log was last written, instead of waiting out --wait-timeout.
TEST_F(LiveDrill, ARunThatCrashedLongAgoIsNamedAtOnce) {
  run_live_to_the_end(24);
  ASSERT_EQ(run_command("touch -d '-2 hours' " + metrics()).exit_code, 0);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = drill("--checkpoint " + ckpt_dir() + "/step_20 --resume-steps 8");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not advancing: its last step is 24, its log last written at 20"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("longer than its stall time of 60 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did it crash or stop? The drill needs step 28"), std::string::npos) << r.output;
}

// Issue 66 item 7: a run that crashes while the drill waits for it: its log stops changing, and
// after --stall-timeout the drill says the run is not advancing.
TEST_F(LiveDrill, ARunThatCrashesWhileTheDrillWaitsIsNotAdvancing) {
  ChildProcess live = start_live_run(400, 0.05);
  const auto start = std::chrono::steady_clock::now();
  while (read_text_file(metrics()).find("\"event\"") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120))
        << read_text_file(live_ / "stderr.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::thread crash([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    live.send_signal(SIGKILL);
  });
  const auto drill_start = std::chrono::steady_clock::now();
  const CommandResult r = drill("--resume-steps 300 --stall-timeout 3");
  crash.join();
  live.wait(30);
  EXPECT_LT(std::chrono::steady_clock::now() - drill_start, std::chrono::seconds(120)) << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not advancing: its last step is "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(--stall-timeout 3)"), std::string::npos) << r.output;
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
