#include "verifier/drill/drill_html.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>

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

// Headless Chromium's DOM of `html` (--dump-dom), or a skip when Chromium is not installed.
const char* kChromium = "/usr/bin/chromium";

testing::CommandResult dump_dom(const testing::TempDir& tmp, const std::string& name,
                                const std::string& html) {
  const std::string page = tmp / name;
  std::ofstream(page) << html;
  return testing::run_command(std::string("timeout 60 ") + kChromium +
                              " --headless --no-sandbox --disable-gpu --disable-background-networking"
                              " --disable-component-update --disable-sync --no-first-run --user-data-dir=" +
                              (tmp / "profile") + " --dump-dom file://" + page + " 2>/dev/null");
}

// A script added to a copy of the page (the report itself has none) that measures, as Chromium laid
// them out, the box of every legend entry and every text of every chart, and writes on <body> each
// pair that overlaps, each box outside its chart, and each legend entry or marker label inside a
// plot area. Boxes are the rendered ones (getBoundingClientRect: rotation and anchors applied).
const char* kOverlapScript = R"(<script>
(function () {
  const box = (e) => e.getBoundingClientRect();
  const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 &&
                         Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  const found = [];
  let items = 0, legends = 0, markers = 0;
  document.querySelectorAll('svg').forEach((svg) => {
    const all = [];
    svg.querySelectorAll('g.legend').forEach((g) => {
      all.push({what: 'legend "' + g.textContent + '"', box: box(g), outside_plot: true});
      ++legends;
    });
    svg.querySelectorAll('text').forEach((t) => {
      if (t.closest('g.legend')) return;
      const marker = t.classList.contains('marker-label');
      if (marker) ++markers;
      all.push({what: '"' + t.textContent + '"', box: box(t), outside_plot: marker});
    });
    const chart = box(svg);
    const plot = svg.querySelector('rect.plot-area');
    all.forEach((a, i) => {
      ++items;
      for (let j = i + 1; j < all.length; ++j)
        if (meet(a.box, all[j].box)) found.push(svg.id + ': ' + a.what + ' overlaps ' + all[j].what);
      if (a.box.left < chart.left - 0.5 || a.box.right > chart.right + 0.5 || a.box.top < chart.top - 0.5 ||
          a.box.bottom > chart.bottom + 0.5)
        found.push(svg.id + ': ' + a.what + ' is outside the chart');
      if (a.outside_plot && !plot) found.push(svg.id + ': no plot area');
      if (a.outside_plot && plot && meet(a.box, box(plot))) found.push(svg.id + ': ' + a.what + ' is in the plot');
    });
  });
  document.body.setAttribute('data-overlaps', JSON.stringify(found));
  document.body.setAttribute('data-counts', items + ' ' + legends + ' ' + markers);
})();
</script>
</body>)";

// The page with kOverlapScript run on it, as Chromium parsed it: what it found, and how many texts,
// legend entries and marker labels it measured.
struct Layout {
  std::string overlaps;
  int items = 0, legends = 0, markers = 0;
};

Layout measured_layout(const testing::TempDir& tmp, const std::string& name, std::string html) {
  const size_t end = html.rfind("</body>");
  EXPECT_NE(end, std::string::npos);
  html.replace(end, 7, kOverlapScript);
  const auto r = dump_dom(tmp, name, html);
  EXPECT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);
  Layout l;
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("data-overlaps=\"([^\"]*)\"")))
    l.overlaps = std::regex_replace(m[1].str(), std::regex("&quot;"), "\"");  // as the script wrote it
  if (std::regex_search(r.output, m, std::regex("data-counts=\"(\\d+) (\\d+) (\\d+)\"")))
    l.items = std::stoi(m[1]), l.legends = std::stoi(m[2]), l.markers = std::stoi(m[3]);
  else
    ADD_FAILURE() << "the measuring script did not run: " << r.output.substr(0, 2000);
  return l;
}

// A crowded report: two kill modes (three curves, four markers, two of them at one step and the
// rest near the right end, where the legend used to be), long curve names, a diverging metric
// charted for both modes, and a nightly history of 40 drills.
nlohmann::json crowded_report(bool live) {
  nlohmann::json r = sample_report();
  r["losses"]["resumed_by_mode"]["during-save"] = nlohmann::json::array();
  for (int s = 9; s <= 12; ++s) {
    r["losses"]["reference"].push_back({{"step", s}, {"loss", 4.0 - 0.2 * s}});
    r["losses"]["resumed_by_mode"]["after-save"].push_back({{"step", s}, {"loss", 4.1 - 0.2 * s}});
  }
  for (int s = 7; s <= 12; ++s)
    r["losses"]["resumed_by_mode"]["during-save"].push_back({{"step", s}, {"loss", 3.9 - 0.2 * s}});
  r["modes"] = {{{"kill", "after-save"}, {"killed_at_step", 10}, {"resumed_from_step", 10}},
                {{"kill", "during-save"}, {"killed_at_step", 11}, {"resumed_from_step", 6}}};
  if (live) {
    r["drill"] = {{"mode", "live"}, {"save_at", 10}, {"resume_steps", 2}};
    r["modes"] = {{{"kill", nullptr}, {"resumed_from_step", 10}}};
    r["losses"]["resumed_by_mode"] = {{"live", r["losses"]["resumed_by_mode"]["after-save"]}};
  }
  nlohmann::json metric = {
      {"field", "grad_norm"}, {"first_diverging_step", 11}, {"reference", nlohmann::json::array()}};
  for (int s = 1; s <= 12; ++s)
    metric["reference"].push_back({s, -123456.7 / s});  // wide value labels: -1.235e+05
  for (const std::string mode : {"after-save", "during-save"})
    for (int s = 11; s <= 12; ++s)
      metric["resumed_by_mode"][live ? "live" : mode].push_back({s, -234567.8 / s});
  r["diverging_metrics"] = {metric};
  nlohmann::json history = nlohmann::json::array();
  for (int d = 0; d < 40; ++d) {
    char time[32];
    std::snprintf(time, sizeof time, "2026-11-%02dT02:%02d:07Z", 1 + d % 28, d);
    history.push_back({{"time", time},
                       {"mode", "scratch after-save"},
                       {"verdict", d % 7 == 3    ? "fail"
                                   : d % 11 == 5 ? "error"
                                                 : "pass"},
                       {"restore_seconds", 0.25 + 0.01 * d},
                       {"checkpoint_bytes", 1000000 + 1000 * d}});
  }
  r["history"] = history;
  return r;
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

// Issue 66 item 10: no chart label lies over the legend, another label, or (legend and marker
// labels) the plot, in either mode: measured as headless Chromium lays the page out. The old layout
// drew the legend in the plot's top right corner and the marker labels in three rows across it.
TEST(DrillHtml, NoChartLabelOverlapsTheLegendOrAnotherLabelInChromium) {
  if (::access(kChromium, X_OK) != 0) GTEST_SKIP() << "chromium not installed at " << kChromium;
  testing::TempDir tmp;
  for (const bool live : {false, true}) {
    SCOPED_TRACE(live ? "live" : "scratch");
    const Layout l =
        measured_layout(tmp, live ? "live.html" : "scratch.html", render_drill_html(crowded_report(live)));
    EXPECT_EQ(l.overlaps, "[]");
    // It measured something: three charts with legends (loss, grad_norm, its difference), their
    // marker labels, and the 40 verdict labels of the history.
    EXPECT_GE(l.legends, live ? 5 : 8);
    EXPECT_GE(l.markers, live ? 2 : 8);
    EXPECT_GE(l.items, 60);
  }
}

// Issue 66 item 10: the verdict trend names each drill's date and verdict, oldest first, besides
// its colour; the trend charts name their first and last drill's dates.
TEST(DrillHtml, TheVerdictTrendShowsEachDrillsDateAndVerdict) {
  const nlohmann::json report = crowded_report(false);
  const std::string html = render_drill_html(report);
  const size_t strip = html.find("id=\"trend-verdicts\"");
  ASSERT_NE(strip, std::string::npos) << html;
  const size_t strip_end = html.find("</svg>", strip);
  const std::string verdicts = html.substr(strip, strip_end - strip);
  std::vector<std::string> labels;
  const std::regex label("<text class=\"verdict-label\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(verdicts.begin(), verdicts.end(), label); it != std::sregex_iterator();
       ++it)
    labels.push_back((*it)[1]);
  ASSERT_EQ(labels.size(), report["history"].size()) << verdicts;
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string time = report["history"][i]["time"];  // 2026-11-04T02:03:07Z
    EXPECT_EQ(labels[i], time.substr(0, 10) + " " + time.substr(11, 5) + " " +
                             report["history"][i]["verdict"].get<std::string>());
  }
  EXPECT_EQ(labels[3], "2026-11-04 02:03 fail");
  EXPECT_EQ(labels[5], "2026-11-06 02:05 error");
  const size_t restore = html.find("id=\"trend-restore_seconds\"");
  ASSERT_NE(restore, std::string::npos);
  const std::string trend = html.substr(restore, html.find("</svg>", restore) - restore);
  EXPECT_NE(trend.find(">2026-11-01 02:00</text>"), std::string::npos) << trend;
  EXPECT_NE(trend.find(">2026-11-12 02:39</text>"), std::string::npos) << trend;
}

}  // namespace
}  // namespace ckpt
