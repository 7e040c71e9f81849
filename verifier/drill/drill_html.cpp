#include "verifier/drill/drill_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "base/byte_units.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace ckpt {

namespace {

constexpr int kWidth = 720, kPlotHeight = 204;

std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4g", v.get<double>());
    return buf;
  }
  return v.dump();
}

struct Curve {
  std::string id, css_class, label;
  std::vector<std::pair<double, double>> points;  // (step, value)
};

// A vertical line at a step: where the subject was killed, where the resumed run started.
struct Marker {
  std::string id, css_class, label;
  double step = 0;
};

std::vector<std::pair<double, double>> points_of(const nlohmann::json& losses) {
  std::vector<std::pair<double, double>> p;
  if (!losses.is_array()) return p;
  for (const auto& e : losses)
    if (json_member_or_null(e, "step").is_number() && json_member_or_null(e, "loss").is_number() &&
        std::isfinite(e["loss"].get<double>()))
      p.emplace_back(e["step"].get<double>(), e["loss"].get<double>());
  return p;
}

// [[step, value], ...] as report.json's diverging_metrics hold them.
std::vector<std::pair<double, double>> pairs_of(const nlohmann::json& series) {
  std::vector<std::pair<double, double>> p;
  if (!series.is_array()) return p;
  for (const auto& e : series)
    if (e.is_array() && e.size() == 2 && e[0].is_number() && e[1].is_number() &&
        std::isfinite(e[1].get<double>()))
      p.emplace_back(e[0].get<double>(), e[1].get<double>());
  return p;
}

// The chart is stacked in horizontal bands that never share a row, so no label can cover another
// whatever its text and whatever the steps: the legend (one row per curve), then the marker labels
// (one row per marker), then the plot area, then the step axis. The legend used to sit in the plot's
// top right corner and the marker labels in three rows across it, and a marker near the right end
// wrote its label over the legend (issue 66).
constexpr int kLegendRow = 16, kMarkerRow = 14, kLeft = 84, kRight = 24, kAxisBand = 24;

std::string line_chart(const std::string& id, const std::string& label, const std::vector<Curve>& curves,
                       const std::vector<Marker>& markers, int plot_height = kPlotHeight) {
  double x0 = std::numeric_limits<double>::max(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& c : curves)
    for (const auto& [x, y] : c.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  for (const auto& m : markers) x0 = std::min(x0, m.step), x1 = std::max(x1, m.step);
  if (y0 > y1) y0 = 0, y1 = 1;
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const int legend_top = 4;
  const int markers_top = legend_top + kLegendRow * static_cast<int>(curves.size()) + 4;
  const int plot_top = markers_top + kMarkerRow * static_cast<int>(markers.size()) + 10;
  const int plot_bottom = plot_top + plot_height;
  const int height = plot_bottom + kAxisBand;
  const auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); };
  const auto sy = [&](double y) { return plot_bottom - (y - y0) / (y1 - y0) * plot_height; };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" << html_escape(id) << "\" width=\"" << kWidth
    << "\" height=\"" << height << "\" viewBox=\"0 0 " << kWidth << " " << height
    << "\" role=\"img\" aria-label=\"" << html_escape(label) << "\">\n";
  s << "<rect x=\"0\" y=\"0\" width=\"" << kWidth << "\" height=\"" << height << "\" fill=\"#fff\"/>\n";
  // The plot area itself (invisible): what the curves and marker lines are drawn in, and what
  // no legend entry or marker label may enter.
  s << "<rect class=\"plot-area\" x=\"" << kLeft << "\" y=\"" << plot_top << "\" width=\""
    << kWidth - kLeft - kRight << "\" height=\"" << plot_height << "\" fill=\"none\"/>\n";
  for (size_t i = 0; i < curves.size(); ++i) {  // legend: one row per curve, above everything else
    const int y = legend_top + kLegendRow * static_cast<int>(i) + 12;
    s << "<g class=\"legend\"><line class=\"" << curves[i].css_class << (i > 1 ? " curve-alt" : "")
      << "\" x1=\"" << kLeft << "\" y1=\"" << y - 4 << "\" x2=\"" << kLeft + 24 << "\" y2=\"" << y - 4
      << "\"/><text x=\"" << kLeft + 30 << "\" y=\"" << y << "\">" << html_escape(curves[i].label)
      << "</text></g>\n";
  }
  s << "<line class=\"axis\" x1=\"" << kLeft << "\" y1=\"" << plot_bottom << "\" x2=\"" << kWidth - kRight
    << "\" y2=\"" << plot_bottom << "\"/><line class=\"axis\" x1=\"" << kLeft << "\" y1=\"" << plot_top
    << "\" x2=\"" << kLeft << "\" y2=\"" << plot_bottom << "\"/>\n";
  s << "<text class=\"axis-label\" x=\"" << kLeft << "\" y=\"" << plot_bottom + 16 << "\">step "
    << text_of(x0) << "</text>";
  s << "<text class=\"axis-label\" x=\"" << kWidth - kRight << "\" y=\"" << plot_bottom + 16
    << "\" text-anchor=\"end\">step " << text_of(x1) << "</text>";
  // The value axis's labels, right-aligned in the left margin at the top and bottom of the plot.
  s << "<text class=\"axis-label\" x=\"" << kLeft - 4 << "\" y=\"" << plot_top + 4
    << "\" text-anchor=\"end\">" << html_escape(text_of(y1)) << "</text>";
  s << "<text class=\"axis-label\" x=\"" << kLeft - 4 << "\" y=\"" << plot_bottom << "\" text-anchor=\"end\">"
    << html_escape(text_of(y0)) << "</text>\n";
  for (size_t i = 0; i < markers.size(); ++i) {
    const Marker& m = markers[i];
    const double x = sx(m.step);
    // Its label in a row of its own above the plot, beside the line's x: to the right of it in the
    // left half of the chart, to the left of it in the right half, so it stays inside the chart.
    const bool right_half = x > kWidth / 2.0;
    s << "<line id=\"" << html_escape(m.id) << "\" class=\"" << m.css_class << "\" x1=\"" << x << "\" y1=\""
      << plot_top << "\" x2=\"" << x << "\" y2=\"" << plot_bottom << "\"><title>" << html_escape(m.label)
      << "</title></line><text class=\"marker-label " << m.css_class << "-label\" x=\""
      << (right_half ? x - 3 : x + 3) << "\" y=\"" << markers_top + kMarkerRow * static_cast<int>(i) + 11
      << "\"" << (right_half ? " text-anchor=\"end\"" : "") << ">" << html_escape(m.label) << "</text>\n";
  }
  for (size_t i = 0; i < curves.size(); ++i) {
    const Curve& c = curves[i];
    s << "<polyline id=\"" << html_escape(c.id) << "\" class=\"" << c.css_class << (i > 1 ? " curve-alt" : "")
      << "\" fill=\"none\" points=\"";
    for (const auto& [x, y] : c.points) s << sx(x) << "," << sy(y) << " ";
    s << "\"><title>" << html_escape(c.label) << "</title></polyline>\n";
  }
  s << "</svg>\n";
  return s.str();
}

// The drill's mode: a live drill compares with the live run's log and kills nothing.
bool is_live(const nlohmann::json& report) {
  return json_member_or_null(json_member_or_null(report, "drill"), "mode") == "live";
}

// The golden curve's name, and a resumed curve's: "resumed after after-save kill", or for a live
// drill "resumed from the snapshot" (a resumed_by_mode key is a kill mode, or "live").
std::string golden_name(bool live) {
  return live ? "live run (its log)" : "reference (uninterrupted)";
}
std::string resumed_name(const std::string& mode) {
  return mode == "live" ? "resumed from the snapshot" : "resumed after " + mode + " kill";
}

// Where each mode's subject was killed and where its resumed run started (a live drill: only where
// it resumed, from the snapshot of the live run's checkpoint).
// `prefix` keeps element ids unique when several charts carry the markers.
std::vector<Marker> kill_and_resume_markers(const nlohmann::json& modes, bool live,
                                            const std::string& prefix = "") {
  std::vector<Marker> markers;
  if (!modes.is_array()) return markers;
  for (const auto& m : modes) {
    const std::string kill = live ? "live" : text_of(json_member_or_null(m, "kill"));
    const auto& killed = json_member_or_null(m, "killed_at_step");
    const auto& resumed = json_member_or_null(m, "resumed_from_step");
    if (killed.is_number() && !live)
      markers.push_back({prefix + "marker-kill-" + kill, "marker-kill",
                         "killed (" + kill + ") at step " + text_of(killed), killed.get<double>()});
    if (resumed.is_number() && resumed.get<double>() >= 0)
      markers.push_back({prefix + "marker-resume-" + kill, "marker-resume",
                         live ? "resumed from the snapshot of step " + text_of(resumed)
                              : "resumed (" + kill + ") from step " + text_of(resumed),
                         resumed.get<double>()});
  }
  return markers;
}

std::string loss_chart(const nlohmann::json& losses, const nlohmann::json& modes, bool live) {
  std::vector<Curve> curves;
  curves.push_back({"curve-reference", "curve-reference", golden_name(live),
                    points_of(json_member_or_null(losses, "reference"))});
  const auto& by_mode = json_member_or_null(losses, "resumed_by_mode");
  if (by_mode.is_object() && !by_mode.empty()) {
    for (const auto& [mode, l] : by_mode.items())
      curves.push_back({"curve-resumed-" + mode, "curve-resumed", resumed_name(mode), points_of(l)});
  } else {
    curves.push_back(
        {"curve-resumed", "curve-resumed", "resumed", points_of(json_member_or_null(losses, "resumed"))});
  }
  return line_chart("loss-chart", "loss per step", curves, kill_and_resume_markers(modes, live));
}

// One diverging metric: reference against each resumed run, and resumed - reference per step.
std::string diverging_metric_charts(const nlohmann::json& metric, const nlohmann::json& modes, bool live) {
  const std::string field = text_of(json_member_or_null(metric, "field"));
  const std::string golden = live ? "live run" : "reference";
  const auto reference = pairs_of(json_member_or_null(metric, "reference"));
  std::vector<Curve> values = {{"metric-" + field + "-reference", "curve-reference", golden, reference}};
  std::vector<Curve> diffs;
  std::map<double, double> by_step(reference.begin(), reference.end());
  const auto& by_mode = json_member_or_null(metric, "resumed_by_mode");
  if (by_mode.is_object())
    for (const auto& [mode, series] : by_mode.items()) {
      const auto resumed = pairs_of(series);
      values.push_back(
          {"metric-" + field + "-resumed-" + mode, "curve-resumed", resumed_name(mode), resumed});
      Curve diff{"diff-" + field + "-" + mode,
                 diffs.empty() ? "curve-reference" : "curve-resumed",
                 live ? "resumed - live run" : "resumed - reference (" + mode + ")",
                 {}};
      for (const auto& [step, v] : resumed)
        if (auto it = by_step.find(step); it != by_step.end()) diff.points.emplace_back(step, v - it->second);
      diffs.push_back(std::move(diff));
    }
  std::ostringstream s;
  const auto& first = json_member_or_null(metric, "first_diverging_step");
  s << "<h3 id=\"diverging-" << html_escape(field) << "\">" << html_escape(field)
    << (first.is_number() ? " (first diverged at step " + text_of(first) + ")" : std::string()) << "</h3>\n";
  s << line_chart("metric-chart-" + field, field + " per step", values,
                  kill_and_resume_markers(modes, live, "metric-" + field + "-"), 124);
  s << line_chart("diff-chart-" + field, field + ": resumed - " + golden, diffs, {}, 84);
  return s.str();
}

// "2026-12-07 05:51" of the history's "2026-12-07T05:51:33Z" (UTC): minutes tell apart the drills
// of one night; anything else is shown as it is.
std::string drill_date(const nlohmann::json& time) {
  const std::string t = text_of(time);
  if (t.size() >= 16 && t[10] == 'T') return t.substr(0, 10) + " " + t.substr(11, 5);
  return t;
}

// One small chart per series of the drill history (report["history"], oldest first): the value of
// `key` per drill as a polyline with dots; a drill that did not measure it leaves a gap. The value
// labels sit right-aligned in the left margin, the first and last drill's dates under the axis.
std::string trend_chart(const nlohmann::json& history, const char* key, const std::string& title) {
  constexpr int w = 720, h = 176, left = 84, right = 20, top = 12, axis_y = h - 28;
  std::vector<std::pair<size_t, double>> points;
  for (size_t i = 0; i < history.size(); ++i)
    if (json_member_or_null(history[i], key).is_number())
      points.emplace_back(i, history[i][key].get<double>());
  std::ostringstream s;
  s << "<h3>" << html_escape(title)
    << "</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"trend\" id=\"trend-" << key << "\" width=\""
    << w << "\" height=\"" << h << "\">\n";
  s << "<line class=\"axis\" x1=\"" << left << "\" y1=\"" << axis_y << "\" x2=\"" << w - right << "\" y2=\""
    << axis_y << "\"/>\n";
  if (points.empty()) {
    s << "<text x=\"" << left << "\" y=\"" << h / 2 << "\">not measured in any drill</text>\n</svg>\n";
    return s.str();
  }
  double lo = points[0].second, hi = lo;
  for (const auto& p : points) lo = std::min(lo, p.second), hi = std::max(hi, p.second);
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  const double n = std::max<double>(1, static_cast<double>(history.size() - 1));
  auto x = [&](size_t i) { return left + (w - left - right) * (static_cast<double>(i) / n); };
  auto y = [&](double v) { return axis_y - (axis_y - top) * ((v - lo) / (hi - lo)); };
  s << "<polyline fill=\"none\" class=\"curve-reference\" points=\"";
  for (const auto& p : points) s << x(p.first) << "," << y(p.second) << " ";
  s << "\"/>\n";
  for (const auto& p : points)
    s << "<circle cx=\"" << x(p.first) << "\" cy=\"" << y(p.second) << "\" r=\"3\"><title>"
      << html_escape(text_of(json_member_or_null(history[p.first], "time"))) << ": "
      << html_escape(text_of(history[p.first][key])) << "</title></circle>\n";
  const bool size = ends_with(key, "_bytes");
  const auto label = [&](double v) { return size ? byte_size_text(v) : text_of(nlohmann::json(v)); };
  s << "<text class=\"axis-label\" x=\"" << left - 6 << "\" y=\"" << y(hi) + 4 << "\" text-anchor=\"end\">"
    << html_escape(label(hi)) << "</text>\n";
  s << "<text class=\"axis-label\" x=\"" << left - 6 << "\" y=\"" << y(lo) + 4 << "\" text-anchor=\"end\">"
    << html_escape(label(lo)) << "</text>\n";
  s << "<text class=\"axis-label trend-date\" x=\"" << left << "\" y=\"" << axis_y + 16 << "\">"
    << html_escape(drill_date(json_member_or_null(history[0], "time"))) << "</text>\n";
  if (history.size() > 1)
    s << "<text class=\"axis-label trend-date\" x=\"" << w - right << "\" y=\"" << axis_y + 16
      << "\" text-anchor=\"end\">" << html_escape(drill_date(json_member_or_null(history.back(), "time")))
      << "</text>\n";
  s << "</svg>\n";
  return s.str();
}

// The verdict of every drill of the history, oldest first: one column each, a coloured square and,
// under it, the drill's date and verdict written upwards. A column is wider than a line of text is
// tall, so no two labels can meet however many drills there are; a long history scrolls sideways.
std::string verdict_strip(const nlohmann::json& history) {
  constexpr int column = 18, label_top = 24, height = 170;
  std::ostringstream s;
  const int w = column * static_cast<int>(history.size()) + 8;
  s << "<h3>Verdicts (oldest first, times UTC)</h3>\n<div class=\"trend-scroll\"><svg "
       "xmlns=\"http://www.w3.org/2000/svg\" class=\"trend\" id=\"trend-verdicts\" width=\""
    << w << "\" height=\"" << height << "\">\n";
  for (size_t i = 0; i < history.size(); ++i) {
    const std::string v = text_of(json_member_or_null(history[i], "verdict"));
    const char* color = v == "pass" ? "#2a9d4a" : v == "fail" ? "#c62828" : "#e0a01a";
    const int x = 4 + column * static_cast<int>(i);
    const std::string date = drill_date(json_member_or_null(history[i], "time"));
    s << "<g class=\"verdict-column\"><rect x=\"" << x << "\" y=\"4\" width=\"" << column - 4
      << "\" height=\"16\" fill=\"" << color << "\" class=\"verdict-" << html_escape(v) << "\"><title>"
      << html_escape(text_of(json_member_or_null(history[i], "time"))) << " "
      << html_escape(text_of(json_member_or_null(history[i], "mode"))) << ": " << html_escape(v)
      << "</title></rect>";
    // Rotated about its anchor, which sits under the square: the text runs down from there,
    // reading upwards, its baseline a few pixels right of the column's middle.
    const int ax = x + (column - 4) / 2 + 4;
    s << "<text class=\"verdict-label\" x=\"" << ax << "\" y=\"" << label_top << "\" text-anchor=\"end\" "
      << "transform=\"rotate(-90 " << ax << " " << label_top << ")\">" << html_escape(date) << " "
      << html_escape(v) << "</text></g>\n";
  }
  s << "</svg></div>\n";
  return s.str();
}

// With `sources` (a measurements table), a value that was not measured reads "not measured",
// never 0 or a dash, and each row says where its value came from.
void key_value_table(std::ostringstream& s, const nlohmann::json& obj, const char* id,
                     const nlohmann::json* sources = nullptr) {
  s << "<table id=\"" << id << "\"><tbody>\n";
  if (obj.is_object())
    for (const auto& [k, v] : obj.items()) {
      if (v.is_object()) continue;
      // Sizes for people: KiB, MiB, GiB (report.json keeps the bytes).
      const bool size = ends_with(k, "_bytes") && v.is_number();
      const std::string value = sources && v.is_null() ? "not measured"
                                : size                 ? byte_size_text(v.get<double>())
                                                       : text_of(v);
      s << "<tr><th>" << html_escape(k) << "</th><td>" << html_escape(value) << "</td>";
      if (sources) s << "<td>" << html_escape(text_of(json_member_or_null(*sources, k.c_str()))) << "</td>";
      s << "</tr>\n";
    }
  s << "</tbody></table>\n";
}

// The drill's command line as one string, for the top of the page.
std::string command_text(const nlohmann::json& program) {
  if (!program.is_array()) return text_of(program);
  std::string line;
  for (const auto& a : program) line += (line.empty() ? "" : " ") + text_of(a);
  return line;
}

// What was run, where: the first thing a reader of a failure needs.
void summary_table(std::ostringstream& s, const nlohmann::json& report) {
  const auto& drill = json_member_or_null(report, "drill");
  const auto& tol = json_member_or_null(report, "tolerance");
  const auto row = [&](const char* name, const std::string& value) {
    s << "<tr><th>" << name << "</th><td>" << html_escape(value) << "</td></tr>\n";
  };
  s << "<table id=\"drill-summary\"><tbody>\n";
  const auto& program = json_member_or_null(drill, "program");
  row("command", program.is_array()
                     ? command_text(program)
                     : "built-in workload, config " + text_of(json_member_or_null(drill, "config_path")));
  if (is_live(report)) {
    const auto& live = json_member_or_null(report, "live");
    row("run", "live run " + text_of(json_member_or_null(live, "metrics")) + ": nothing killed");
    row("N (the live run's checkpoint, snapshotted)", text_of(json_member_or_null(drill, "save_at")) + " (" +
                                                          text_of(json_member_or_null(live, "checkpoint")) +
                                                          ")");
  } else {
    row("N (killed at the checkpoint of step)", text_of(json_member_or_null(drill, "save_at")));
  }
  row("K (steps after N)", text_of(json_member_or_null(drill, "resume_steps")));
  if (!json_member_or_null(drill, "kill").is_null()) row("kill", text_of(drill["kill"]));
  const auto& kept = json_member_or_null(drill, "work_dir_kept");
  row("work dir",
      text_of(json_member_or_null(drill, "work_dir")) + (kept == false  ? " (removed: the drill passed)"
                                                         : kept == true ? " (kept)"
                                                                        : ""));
  row("tolerance", "rtol " + text_of(json_member_or_null(tol, "rtol")) + ", atol " +
                       text_of(json_member_or_null(tol, "atol")) + " (" +
                       text_of(json_member_or_null(tol, "applied")) + ")");
  s << "</tbody></table>\n";
}

}  // namespace

std::string render_drill_html(const nlohmann::json& report) {
  const std::string verdict =
      json_member_or_null(report, "verdict").is_string() ? report["verdict"].get<std::string>() : "unknown";
  std::ostringstream s;
  s << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ckptcheck drill: "
    << html_escape(verdict) << "</title>\n<style>\n"
    << "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}"
    << ".verdict{font-size:1.6em;font-weight:bold;padding:.4em .8em;border-radius:6px}"
    << ".verdict-pass{background:#d9f2dc;color:#145a1f}.verdict-fail{background:#f8d7d7;color:#7a1111}"
    << ".verdict-error{background:#fde9c8;color:#6b4500}"
    << "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .6em;"
    << "text-align:left;font-size:.9em}.bad{background:#fbe3e3}.warn{background:#fdf3d0}"
    << "svg text{font-size:11px;fill:#444}.axis{stroke:#888;stroke-width:1}"
    << ".curve-reference{stroke:#1f5fbf;stroke-width:2.5}.curve-resumed{stroke:#e0661a;stroke-width:1.5;"
    << "stroke-dasharray:5 3}.curve-alt{stroke:#2a9d4a}"
    << ".marker-kill{stroke:#c62828;stroke-width:1.5}.marker-resume{stroke:#2a9d4a;stroke-width:1.5;"
    << "stroke-dasharray:2 2}.marker-kill-label{fill:#c62828}.marker-resume-label{fill:#1f7a35}"
    << ".trend-scroll{overflow-x:auto;max-width:100%}\n</style></head><body>\n";
  s << "<div id=\"verdict\" class=\"verdict verdict-" << html_escape(verdict) << "\">"
    << html_escape(verdict == "pass"   ? "PASS"
                   : verdict == "fail" ? "FAIL"
                                       : "ERROR");
  s << (json_member_or_null(report, "bit_identical") == true ? " &mdash; bit-identical" : "") << "</div>\n";
  // One cause under the verdict, before the drill's parameters and the failures it explains.
  if (json_member_or_null(report, "headline").is_string())
    s << "<p id=\"headline\" class=\"headline\"><b>Cause:</b> "
      << html_escape(report["headline"].get<std::string>()) << "</p>\n";
  // What happened, in one line: a live drill kills nothing; it resumes a snapshot of the live run.
  if (is_live(report)) {
    const auto& drill = json_member_or_null(report, "drill");
    const auto& n = json_member_or_null(drill, "save_at");
    const auto& k = json_member_or_null(drill, "resume_steps");
    std::string to;
    if (n.is_number_integer() && k.is_number_integer())
      to = " to step " + std::to_string(n.get<int64_t>() + k.get<int64_t>());
    s << "<p id=\"what-happened\">Live run, snapshot of step " << html_escape(text_of(n))
      << ", resumed from it" << html_escape(to) << " and compared with the live run's log; nothing was "
      << "killed.</p>\n";
  }
  summary_table(s, report);
  if (json_member_or_null(report, "error").is_string() && !report["error"].get<std::string>().empty())
    s << "<p id=\"error\"><b>Error:</b> " << html_escape(report["error"].get<std::string>()) << "</p>\n";
  const auto& failures = json_member_or_null(report, "failures");
  if (failures.is_array() && !failures.empty()) {
    s << "<ul id=\"failures\">\n";
    for (const auto& f : failures) s << "<li>" << html_escape(text_of(f)) << "</li>\n";
    s << "</ul>\n";
  }
  const auto& checks = json_member_or_null(report, "checks");
  std::vector<std::string> warnings;
  if (checks.is_array())
    for (const auto& c : checks)
      if (json_member_or_null(c, "skipped") == true)
        warnings.push_back(text_of(json_member_or_null(c, "name")) + " (" +
                           text_of(json_member_or_null(c, "mode")) +
                           "): " + text_of(json_member_or_null(c, "detail")));
  if (!warnings.empty()) {
    s << "<ul id=\"warnings\" class=\"warn\">\n";
    for (const auto& w : warnings) s << "<li>warning: " << html_escape(w) << "</li>\n";
    s << "</ul>\n";
  }
  const auto& modes = json_member_or_null(report, "modes");
  const bool live = is_live(report);
  s << "<h2>Loss: " << (live ? "live run" : "reference") << " vs resumed</h2>\n"
    << loss_chart(json_member_or_null(report, "losses"), modes, live);
  const auto& diverging = json_member_or_null(report, "diverging_metrics");
  if (diverging.is_array() && !diverging.empty()) {
    s << "<h2 id=\"diverging-metrics\">Diverging metrics, earliest first</h2>\n";
    for (const auto& m : diverging) s << diverging_metric_charts(m, modes, live);
  }

  s << "<h2>Final state by component</h2>\n<table "
       "id=\"divergence\"><thead><tr><th>component</th><th>judged by</th><th>tensors</th>"
    << "<th>max abs</th><th>max rel</th><th>bit-identical</th><th>passed</th><th>first "
       "diverging</th></tr></thead><tbody>\n";
  const auto& comps = json_member_or_null(report, "components");
  if (comps.is_object())
    for (const bool failing : {true, false})  // the components that diverged first
      for (const auto& [name, c] : comps.items()) {
        const bool ok = json_member_or_null(c, "passed") == true;
        if (ok == failing) continue;
        // A byte state's difference has no magnitude: the message says where it starts.
        const bool bytes = json_member_or_null(json_member_or_null(c, "first_diverging"), "byte").is_number();
        const auto& note = json_member_or_null(c, "note");
        s << "<tr" << (ok ? "" : " class=\"bad\"") << "><td>" << html_escape(name)
          << "</td><td class=\"rule\">" << html_escape(text_of(json_member_or_null(c, "rule")))
          << (note.is_string() ? "<br><small>" + html_escape(note.get<std::string>()) + "</small>" : "")
          << "</td><td>" << html_escape(text_of(json_member_or_null(c, "tensors"))) << "</td><td>"
          << (bytes ? "bytes differ" : html_escape(text_of(json_member_or_null(c, "max_abs")))) << "</td><td>"
          << (bytes ? "-" : html_escape(text_of(json_member_or_null(c, "max_rel")))) << "</td><td>"
          << html_escape(text_of(json_member_or_null(c, "bit_identical"))) << "</td><td>"
          << (ok ? "yes" : "no") << "</td><td>" << html_escape(text_of(json_member_or_null(c, "message")))
          << "</td></tr>\n";
      }
  s << "</tbody></table>\n";

  s << "<h2>Checks</h2>\n<table "
       "id=\"checks\"><thead><tr><th>check</th><th>"
    << (live ? "run" : "kill") << "</th><th>passed</th><th>detail</th></tr>"
    << "</thead><tbody>\n";
  if (checks.is_array())
    for (const auto& c : checks) {
      const bool skipped = json_member_or_null(c, "skipped") == true;
      const bool ok = json_member_or_null(c, "passed") == true;
      s << "<tr"
        << (skipped ? " class=\"warn\""
            : ok    ? ""
                    : " class=\"bad\"")
        << "><td>" << html_escape(text_of(json_member_or_null(c, "name"))) << "</td><td>"
        << html_escape(text_of(json_member_or_null(c, "mode"))) << "</td><td>"
        << (skipped ? "skipped"
            : ok    ? "yes"
                    : "no")
        << "</td><td>" << html_escape(text_of(json_member_or_null(c, "detail"))) << "</td></tr>\n";
    }
  s << "</tbody></table>\n";
  const auto& history = json_member_or_null(report, "history");
  if (history.is_array() && !history.empty()) {
    s << "<h2 id=\"history\">Trend over " << history.size() << " drill(s)</h2>\n"
      << verdict_strip(history) << trend_chart(history, "restore_seconds", "Restore time (seconds)")
      << trend_chart(history, "checkpoint_bytes", "Checkpoint size")
      << trend_chart(history, "snapshot_seconds", "Snapshot time (seconds, live drills)");
  }
  const auto& measurements = json_member_or_null(report, "measurements");
  s << "<h2>Timings (seconds unless named)</h2>\n";
  const nlohmann::json& sources = json_member_or_null(measurements, "sources");
  key_value_table(s, json_member_or_null(measurements, "timings"), "timings", &sources);
  s << "<h2>Memory</h2>\n";
  key_value_table(s, json_member_or_null(measurements, "memory"), "memory", &sources);
  s << "<h2>Drill</h2>\n";
  // The command as one line (the interpreter and its script), not the interpreter alone.
  nlohmann::json drill = json_member_or_null(report, "drill");
  if (drill.is_object() && drill.contains("program") && drill["program"].is_array())
    drill["program"] = command_text(drill["program"]);
  key_value_table(s, drill, "drill");
  s << "</body></html>\n";
  return s.str();
}

}  // namespace ckpt
