// The JUnit file and the history line are built from report.json: a failed check becomes a
// <failure> with its message (hostile characters escaped, the file still XML), a drill that could
// not run an <error>; a history file with a torn last line still reads, a corrupt line is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/test_support.h"
#include "verifier/drill/drill_history.h"
#include "verifier/drill/drill_junit.h"
#include "verifier/drill/drill_report.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

nlohmann::json report_with(bool passed, int exit_code, const std::string& error = "") {
  return {
      {"verdict", exit_code == 0   ? "pass"
                  : exit_code == 1 ? "fail"
                                   : "error"},
      {"exit_code", exit_code},
      {"error", error},
      {"failures", passed ? nlohmann::json::array() : nlohmann::json::array({"loss diverged"})},
      {"drill", {{"mode", "scratch"}, {"save_at", 4}, {"resume_steps", 4}, {"kill", "after-save"}}},
      {"checks",
       {{{"name", "contract"},
         {"mode", ""},
         {"passed", true},
         {"detail", "N=4"},
         {"numbers", nlohmann::json::object()}},
        {{"name", "metric_loss"},
         {"mode", "after-save"},
         {"passed", passed},
         {"detail", "loss diverged at step 5: <a & \"b\"> \x01"},
         {"numbers", {{"max_abs", 0.25}}}},
        {{"name", "final_state"},
         {"mode", "after-save"},
         {"passed", passed},
         {"detail", "1 component(s) diverged"},
         {"numbers",
          {{"diverged", {"optimizer diverged: exp_avg max abs 0.01"}},
           {"diverged_components", passed ? nlohmann::json::array() : nlohmann::json::array({"optimizer"})},
           {"rules", {{"optimizer", "bit-exact"}, {"rank_1", "absent-as-in-control"}}}}},
         {"seconds", 1.25}}}},
      {"measurements",
       {{"timings", {{"restore_seconds", 1.5}, {"checkpoint_bytes", 4096}, {"drill_wall_seconds", 3}}}}}};
}

TEST(DrillJunit, AFailedCheckIsAFailureWithItsMessageEscaped) {
  const std::string xml = drill_junit_xml(report_with(false, 1));
  EXPECT_NE(xml.find("<testsuite name=\"ckptcheck.drill\" tests=\"3\" failures=\"2\" errors=\"0\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testcase classname=\"ckptcheck.drill.after-save\" name=\"metric_loss\""),
            std::string::npos);
  EXPECT_NE(xml.find("message=\"loss diverged at step 5: &lt;a &amp; &quot;b&quot;&gt; ?\""),
            std::string::npos)
      << xml;
  // final_state names the diverging components in its failure.
  EXPECT_NE(xml.find("optimizer diverged: exp_avg max abs 0.01</failure>"), std::string::npos) << xml;
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
}

TEST(DrillJunit, FinalStateNamesTheRuleOfEveryComponentPassOrFail) {
  for (const bool passed : {true, false}) {
    const std::string xml = drill_junit_xml(report_with(passed, passed ? 0 : 1));
    // A diverged component failed its rule: never "optimizer: bit-exact" for it (issue 66 item 10).
    EXPECT_NE(xml.find(std::string("<system-out>optimizer: ") +
                       (passed ? "bit-exact" : "diverged (required bit-exact)") +
                       "\nrank_1: absent-as-in-control\n</system-out>\n    </testcase>"),
              std::string::npos)
        << xml;
    // Each check carries its own time; one without a time says 0.
    EXPECT_NE(xml.find("name=\"final_state\" time=\"1.250\""), std::string::npos) << xml;
    EXPECT_NE(xml.find("name=\"contract\" time=\"0\""), std::string::npos) << xml;
  }
}

TEST(DrillJunit, APassingDrillHasNoFailureAndAnErrorIsAnErrorTestcase) {
  const std::string pass = drill_junit_xml(report_with(true, 0));
  EXPECT_EQ(pass.find("<failure"), std::string::npos) << pass;
  EXPECT_NE(pass.find("failures=\"0\" errors=\"0\""), std::string::npos);
  const std::string error = drill_junit_xml(report_with(true, 2, "subject never reached its kill point"));
  EXPECT_NE(error.find("errors=\"1\""), std::string::npos) << error;
  EXPECT_NE(error.find("<error message=\"subject never reached its kill point\""), std::string::npos)
      << error;
}

TEST(DrillHistory, AnEntryTakesTheReportsNumbersAndNullForWhatItLacks) {
  const nlohmann::json e = drill_history_entry(report_with(false, 1), 0);
  EXPECT_EQ(e["time"], "1970-01-01T00:00:00Z");
  EXPECT_EQ(e["verdict"], "fail");
  EXPECT_EQ(e["restore_seconds"], 1.5);
  EXPECT_EQ(e["checkpoint_bytes"], 4096);
  EXPECT_TRUE(e["snapshot_seconds"].is_null());
  EXPECT_EQ(e["max_abs"]["loss"], 0.25);
  EXPECT_EQ(e["failures"], 1);
}

TEST(DrillHistory, AppendsLinesAndDropsOnlyATornLastLine) {
  TempDir dir;
  const std::string path = dir / "history.jsonl";
  auto none = read_drill_history(path);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(append_drill_history(path, {{"verdict", "pass"}}).is_ok());
  ASSERT_TRUE(append_drill_history(path, {{"verdict", "fail"}}).is_ok());
  std::ofstream(path, std::ios::app) << "{\"verdict\": \"pa";  // a drill killed while appending
  auto read = read_drill_history(path);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[1]["verdict"], "fail");
  std::ofstream(path, std::ios::app) << "\n{\"verdict\": \"pass\"}\n";
  auto corrupt = read_drill_history(path);
  ASSERT_FALSE(corrupt.is_ok());
  EXPECT_NE(corrupt.status().message().find("history.jsonl:3"), std::string::npos)
      << corrupt.status().message();
}

// A drill killed while appending left a torn last line: the next drill's line starts on a fresh
// line (the torn one dropped), and the drill after that still reads every line.
TEST(DrillHistory, ATornLastLineNeverBreaksTheNextDrills) {
  TempDir dir;
  const std::string path = dir / "history.jsonl";
  ASSERT_TRUE(append_drill_history(path, {{"verdict", "pass"}}).is_ok());
  std::ofstream(path, std::ios::app) << "{\"verdict\": \"fa";  // killed mid-append
  ASSERT_TRUE(append_drill_history(path, {{"verdict", "fail"}}).is_ok());
  ASSERT_TRUE(append_drill_history(path, {{"verdict", "error"}}).is_ok());
  auto read = read_drill_history(path);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[1]["verdict"], "fail");
  EXPECT_EQ((*read)[2]["verdict"], "error");
  // A whole last object that lost only its newline is kept, and the next line starts after it.
  std::ofstream(path, std::ios::app) << "{\"verdict\": \"kept\"}";
  ASSERT_TRUE(append_drill_history(path, {{"verdict", "next"}}).is_ok());
  read = read_drill_history(path);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  ASSERT_EQ(read->size(), 5u);
  EXPECT_EQ((*read)[3]["verdict"], "kept");
  EXPECT_EQ((*read)[4]["verdict"], "next");
  // Written whole beside the file and renamed: no temp file is left behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);
}

// An errored drill measured nothing: null, not 0.0; counts are integers and seconds floating point
// in every mode (a live drill's 26603 and a drill from scratch's 26603.0 are one number).
TEST(DrillHistory, NumbersAreTypedAlikeAndAnErrorHoldsNull) {
  nlohmann::json report = report_with(true, 2, "subject never reached its kill point");
  report["measurements"]["timings"] = {{"checkpoint_bytes", nullptr}, {"restore_seconds", nullptr}};
  const nlohmann::json e = drill_history_entry(report, 0);
  EXPECT_TRUE(e["checkpoint_bytes"].is_null()) << e.dump();
  EXPECT_TRUE(e["restore_seconds"].is_null()) << e.dump();
  nlohmann::json scratch = report_with(true, 0), live = report_with(true, 0);
  scratch["measurements"]["timings"] = {{"checkpoint_bytes", 26603.0}, {"restore_seconds", 2}};
  live["measurements"]["timings"] = {{"checkpoint_bytes", 26603}, {"restore_seconds", 2.0}};
  EXPECT_EQ(drill_history_entry(scratch, 0).dump(), drill_history_entry(live, 0).dump());
  EXPECT_NE(drill_history_entry(scratch, 0).dump().find("\"checkpoint_bytes\":26603,"), std::string::npos)
      << drill_history_entry(scratch, 0).dump();
}

TEST(DrillHistory, AnErroredProgramDrillReportsNullNotZero) {
  for (const bool built_in : {false, true}) {
    DrillOutcome o;
    o.built_in = built_in;
    o.exit_code = 2;
    o.error = "subject did not die of SIGKILL: exit 0";
    const nlohmann::json report = drill_report_json(o, DrillOptions{});
    const nlohmann::json e = drill_history_entry(report, 0);
    EXPECT_TRUE(e["checkpoint_bytes"].is_null()) << built_in << " " << e.dump();
    EXPECT_TRUE(e["restore_seconds"].is_null()) << built_in << " " << e.dump();
  }
}

}  // namespace
}  // namespace ckpt
