// The drill resumed on another world size judges per-rank state by the control run, whatever the
// program names it: tests/data/programs/ranked_state_program.py (no torch, ranks through `launch`)
// keeps its per-rank state four ways (rank_<r>.pt, random_states_<r>.pkl, rng_state_<r>.pth,
// rank<r>/state.pt). Each passes 2 -> 1 (rank 1's state absent as in the control) and 1 -> 2 (rank
// 1's state held as in the control); each with every rank restoring rank 0's state fails at one
// world size; state the control holds and the resumed run lost fails; the live drill does the same.
// The rule that judged each component is in the terminal, report.json, JUnit and the HTML.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/process_scan.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

const std::string kRankedProgram =
    std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/ranked_state_program.py";

struct Naming {
  const char* scheme;  // --per-rank
  const char* rank0;   // the component rank 0's file becomes
  const char* rank1;
};

const Naming kNamings[] = {{"rank_pt", "rank_0", "rank_1"},
                           {"random_states_pkl", "random_states_0", "random_states_1"},
                           {"rng_state_pth", "rng_state_0", "rng_state_1"},
                           {"rank_dir", "rank0/state", "rank1/state"}};

class WorldSizeDrill : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built"; }
  void TearDown() override {
    EXPECT_TRUE(processes_whose_environment_contains(work_.path()).empty())
        << "a rank outlived the drill: " << processes_whose_environment_contains(work_.path())[0];
  }
  // A drill on P ranks resumed on Q, its report in report_dir(tag).
  CommandResult drill(int p, int q, const std::string& program_args, const std::string& tag) {
    return run_ckptcheck("drill --save-at 4 --resume-steps 4 --work-dir " + work_.path() +
                         " --nproc-per-node " + std::to_string(p) + " --resume-nproc " + std::to_string(q) +
                         " --report-dir " + report_dir(tag) + " --junit " + report_dir(tag) +
                         ".junit.xml -- /usr/bin/python3 " + kRankedProgram + " " + program_args + " 2>&1");
  }
  std::string report_dir(const std::string& tag) const { return work_ / ("report-" + tag); }
  nlohmann::json component(const std::string& tag, const std::string& name) const {
    const nlohmann::json report = nlohmann::json::parse(read_text_file(report_dir(tag) + "/report.json"));
    const nlohmann::json& components = report.at("components");
    EXPECT_TRUE(components.contains(name)) << name << " not in " << components.dump(1);
    return components.value(name, nlohmann::json::object());
  }
  TempDir work_;
};

class PerRankNaming : public WorldSizeDrill, public ::testing::WithParamInterface<Naming> {};

TEST_P(PerRankNaming, ResumedOnFewerAndOnMoreRanksPassesJudgedByTheControlRun) {
  const Naming& n = GetParam();
  const CommandResult fewer = drill(2, 1, std::string("--per-rank ") + n.scheme, "2to1");
  ASSERT_EQ(fewer.exit_code, 0) << fewer.output;
  const nlohmann::json gone = component("2to1", n.rank1);
  EXPECT_EQ(gone.value("rule", ""), "absent-as-in-control") << gone.dump(1);
  EXPECT_EQ(gone.value("passed", false), true) << gone.dump(1);
  EXPECT_NE(gone.value("note", "").find("absent at world size 1, as in an uninterrupted run"),
            std::string::npos)
      << gone.dump(1);
  const nlohmann::json kept = component("2to1", n.rank0);
  EXPECT_EQ(kept.value("rule", ""), "bit-exact")
      << "rank 0's stream and position do not depend on the world size\n"
      << kept.dump(1);
  const std::string model_rule = component("2to1", "model").value("rule", "");
  EXPECT_TRUE(model_rule == "bit-exact" || model_rule == "tolerance" || model_rule == "envelope")
      << model_rule;

  const CommandResult more = drill(1, 2, std::string("--per-rank ") + n.scheme, "1to2");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  const nlohmann::json grown = component("1to2", n.rank1);
  EXPECT_EQ(grown.value("rule", ""), "held-as-in-control") << grown.dump(1);
  EXPECT_EQ(grown.value("passed", false), true) << grown.dump(1);
}

TEST_P(PerRankNaming, EveryRankRestoringRankZerosStateFailsAtOneWorldSize) {
  const Naming& n = GetParam();
  const CommandResult r = drill(2, 2, std::string("--per-rank ") + n.scheme + " --bug rank0-state", "bug");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(std::string("FAIL: ") + n.rank1 + " diverged: " + n.rank1 + ".rng is "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(component("bug", n.rank1).value("rule", ""), "bit-exact");
  EXPECT_EQ(component("bug", n.rank0).value("passed", false), true);
}

INSTANTIATE_TEST_SUITE_P(Names, PerRankNaming, ::testing::ValuesIn(kNamings),
                         [](const ::testing::TestParamInfo<Naming>& i) {
                           return std::string(i.param.scheme);
                         });

TEST_F(WorldSizeDrill, StateTheControlHoldsAndTheResumedRunLostFails) {
  const CommandResult r = drill(2, 1, "--bug lose-rank-state", "lost");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL: rank_0 diverged: rank_0.data.cursor missing in the resumed run, which an "
                          "uninterrupted run at world size 1 holds (the control run) [held-as-in-control]"),
            std::string::npos)
      << r.output;
  // Rank 1's file is absent from the control too: that is no failure.
  EXPECT_EQ(component("lost", "rank_1").value("passed", false), true);
  EXPECT_EQ(r.output.find("FAIL: rank_1"), std::string::npos) << r.output;
}

TEST_F(WorldSizeDrill, TheRuleOfEveryComponentIsInTheTerminalJunitAndHtml) {
  const CommandResult r = drill(2, 1, "", "report");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the control run at 1 rank(s) decides what state the resumed run must hold"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("absent-as-in-control rank_1 (absent at world size 1, as in an uninterrupted run)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bit-exact rank_0"), std::string::npos) << r.output;
  const std::string junit = read_text_file(report_dir("report") + ".junit.xml");
  EXPECT_NE(junit.find("rank_1: absent-as-in-control\n"), std::string::npos) << junit;
  EXPECT_NE(junit.find("rank_0: bit-exact\n"), std::string::npos) << junit;
  const std::string html = read_text_file(report_dir("report") + "/report.html");
  EXPECT_NE(
      html.find("<td>rank_1</td><td class=\"rule\">absent-as-in-control<br><small>absent at world size 1"),
      std::string::npos)
      << html;
}

TEST_F(WorldSizeDrill, ALiveRunOnTwoRanksResumedOnOneIsJudgedByTheControl) {
  const std::string live = work_ / "live";
  const CommandResult run = run_command(
      "mkdir -p " + live + " && CKPTCHECK_CKPT_DIR=" + live +
      "/ckpt CKPTCHECK_STEPS=8 CKPTCHECK_SAVE_EVERY=4 CKPTCHECK_METRICS=" + live + "/metrics.jsonl " +
      CKPTCHECK_BIN + " launch --nproc-per-node 2 -- /usr/bin/python3 " + kRankedProgram + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const CommandResult r =
      run_ckptcheck("drill --live " + live + "/metrics.jsonl --work-dir " + work_.path() +
                    " --nproc-per-node 2 --resume-nproc 1 -- /usr/bin/python3 " + kRankedProgram + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("control_envelope"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("absent-as-in-control rank_1 (absent at world size 1, as in a second resumed run)"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ckpt
