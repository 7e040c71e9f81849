#include "verifier/drill/drill_html.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "tests/support/test_support.h"
#include "verifier/drill/drill_report.h"

namespace ckpt {
namespace {

nlohmann::json sample_report() {
  nlohmann::json losses = {{"reference", nlohmann::json::array()},
                           {"resumed_by_mode", nlohmann::json::object()}};
  for (int s = 1; s <= 8; ++s) losses["reference"].push_back({{"step", s}, {"loss", 4.0 - 0.2 * s}});
  for (int s = 5; s <= 8; ++s)
    losses["resumed_by_mode"]["after-save"].push_back({{"step", s}, {"loss", 4.1 - 0.2 * s}});
  losses["resumed"] = losses["resumed_by_mode"]["after-save"];
  return {{"verdict", "fail"},
          {"bit_identical", false},
          {"tolerance", {{"rtol", 0}, {"atol", 0}, {"applied", "exact"}}},
          {"failures", {"optimizer diverged: optimizer.<script>alert(1)</script> max abs 0.1 at [1]"}},
          {"components",
           {{"optimizer",
             {{"passed", false},
              {"tensors", 3},
              {"max_abs", 0.1},
              {"rule", "bit-exact"},
              {"message", "optimizer diverged: optimizer.<b>x</b>"}}},
            {"rank_1",
             {{"passed", true},
              {"tensors", 0},
              {"rule", "absent-as-in-control"},
              {"note", "absent at world size 1, as in an uninterrupted run"}}}}},
          {"checks", {{{"name", "verify"}, {"mode", "after-save"}, {"passed", true}, {"detail", "a & b"}}}},
          {"losses", losses},
          {"measurements",
           {{"timings", {{"step_seconds_mean", 0.05}}}, {"memory", {{"peak_rss_bytes", 123456}}}}}};
}

TEST(DrillHtml, EscapesEveryStringFromTheReport) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  const std::string html = render_drill_html(sample_report());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>x"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &amp; b"), std::string::npos);
}

TEST(DrillHtml, IsSelfContainedWithVerdictFirstAndBothCurves) {
  const std::string html = render_drill_html(sample_report());
  // The only URL is the SVG namespace name, which browsers never fetch.
  size_t urls = 0;
  for (size_t at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1)) ++urls;
  EXPECT_EQ(urls, 1u);
  EXPECT_NE(html.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  const size_t verdict = html.find("id=\"verdict\"");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, html.find("<svg"));
  EXPECT_NE(html.find("<polyline id=\"curve-reference\""), std::string::npos);
  EXPECT_NE(html.find("<polyline id=\"curve-resumed-after-save\""), std::string::npos);
}

TEST(DrillHtml, RendersInHeadlessChromium) {
  const char* chromium = "/usr/bin/chromium";
  if (::access(chromium, X_OK) != 0) GTEST_SKIP() << "chromium not installed at " << chromium;
  testing::TempDir tmp;
  const std::string page = tmp / "report.html";
  std::ofstream(page) << render_drill_html(sample_report());
  const auto r =
      testing::run_command(std::string("timeout 60 ") + chromium +
                           " --headless --no-sandbox --disable-gpu --disable-background-networking"
                           " --disable-component-update --disable-sync --no-first-run --user-data-dir=" +
                           (tmp / "profile") + " --dump-dom file://" + page + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The DOM as the browser parsed it: both polylines exist with points, and the verdict text.
  EXPECT_NE(r.output.find("id=\"curve-reference\""), std::string::npos) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("id=\"curve-resumed-after-save\""), std::string::npos);
  EXPECT_NE(r.output.find("class=\"curve-resumed\""), std::string::npos);
  EXPECT_NE(r.output.find("FAIL"), std::string::npos);
  EXPECT_EQ(r.output.find("<script>alert"), std::string::npos);
}

TEST(DrillHtml, EveryComponentNamesTheRuleThatJudgedIt) {
  const std::string html = render_drill_html(sample_report());
  EXPECT_NE(html.find("<th>judged by</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>optimizer</td><td class=\"rule\">bit-exact</td>"), std::string::npos) << html;
  EXPECT_NE(
      html.find("<td>rank_1</td><td class=\"rule\">absent-as-in-control<br><small>absent at world size 1, "
                "as in an uninterrupted run</small></td>"),
      std::string::npos)
      << html;
}

// Issue 66 item 10: a program drill's Drill table names the whole command (interpreter and script)
// and no built-in setting (format, shards); a failed drill's cause stands under the verdict.
TEST(DrillHtml, AProgramDrillShowsItsCommandAndTheCauseUnderTheVerdict) {
  DrillOutcome o;
  o.built_in = false;
  o.exit_code = 1;
  o.failures = {"loss diverged at step 6 (after-save kill)"};
  o.headline = "started from scratch: first logged step 1, expected 5 (after-save kill)";
  DrillOptions options;
  options.command = {"/usr/bin/python3", "my_train.py", "--lr", "3e-3"};
  const nlohmann::json report = drill_report_json(o, options);
  EXPECT_FALSE(report["drill"].contains("shards")) << report["drill"].dump();
  EXPECT_FALSE(report["drill"].contains("format")) << report["drill"].dump();
  const std::string html = render_drill_html(report);
  const size_t drill_table = html.find("<h2>Drill</h2>");
  ASSERT_NE(drill_table, std::string::npos);
  EXPECT_NE(html.find("/usr/bin/python3 my_train.py --lr 3e-3", drill_table), std::string::npos)
      << html.substr(drill_table);
  EXPECT_EQ(html.find("native", drill_table), std::string::npos) << html.substr(drill_table);
  const size_t verdict = html.find("id=\"verdict\""), cause = html.find("id=\"headline\"");
  const size_t failures = html.find("id=\"failures\"");
  ASSERT_NE(cause, std::string::npos) << html;
  EXPECT_LT(verdict, cause);
  EXPECT_LT(cause, failures);
  EXPECT_NE(html.find("started from scratch: first logged step 1, expected 5", cause), std::string::npos);
}

}  // namespace
}  // namespace ckpt
