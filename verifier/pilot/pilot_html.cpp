#include "verifier/pilot/pilot_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/byte_units.h"
#include "verifier/drill/drill_html.h"

namespace ckpt {

namespace {

std::string number(double v, const char* pattern = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, v);
  return buf;
}

double number_or_zero(const nlohmann::json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number() ? obj[key].get<double>() : 0;
}

std::string text_or_empty(const nlohmann::json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : "";
}

void render_matrix(std::ostringstream& s, const nlohmann::json& m) {
  s << "<h2>Precision &times; activation checkpointing</h2>\n<table><tr><th>variant</th><th>step MiB</th>"
       "<th>peak MiB</th><th>step s</th><th>tokens/s</th><th>loss max rel. diff vs fp32</th>"
       "<th>eval loss</th></tr>\n";
  std::vector<std::pair<std::string, double>> memory, time;
  for (const auto& v : m.value("variants", nlohmann::json::array())) {
    const std::string name = text_or_empty(v, "name");
    const double step_mib = number_or_zero(v, "step_memory_bytes") / kBytesPerMiB;
    const double seconds = number_or_zero(v, "step_seconds");
    memory.emplace_back(name, step_mib);
    time.emplace_back(name, seconds);
    s << "<tr><td>" << html_escape(name) << "</td><td>" << number(step_mib, "%.1f") << "</td><td>"
      << number(number_or_zero(v, "step_peak_rss_bytes") / kBytesPerMiB, "%.1f") << "</td><td>"
      << number(seconds) << "</td><td>" << number(number_or_zero(v, "tokens_per_second"), "%.0f")
      << "</td><td>"
      << number(number_or_zero(v.value("vs_fp32", nlohmann::json::object()), "loss_max_relative_difference"),
                "%.3g")
      << "</td><td>" << number(number_or_zero(v, "eval_loss"), "%.4f") << "</td></tr>\n";
  }
  s << "</table>\n<p class=\"note\">step MiB: resident growth over one full step including the optimizer "
       "step "
       "(VmHWM reset just before it).</p>\n<div class=\"charts\">"
    << svg_bar_chart("step memory", memory, "MiB") << svg_bar_chart("step time", time, "s")
    << "</div>\n<ul>\n";
  for (const auto& c : m.value("checks", nlohmann::json::array())) {
    const bool ok = c.value("passed", false);
    s << "<li class=\"" << (ok ? "ok" : "fail") << "\">" << (ok ? "ok" : "FAIL") << " &mdash; "
      << html_escape(text_or_empty(c, "name")) << ": " << html_escape(text_or_empty(c, "detail"))
      << "</li>\n";
  }
  s << "</ul>\n";
  for (const auto& line : m.value("summary", nlohmann::json::array())) {
    if (line.is_string()) s << "<p>" << html_escape(line.get<std::string>()) << "</p>\n";
  }
}

void render_scaling(std::ostringstream& s, const nlohmann::json& sc) {
  s << "<h2>Data-parallel scaling</h2>\n";
  if (sc.contains("model") && sc["model"].is_object()) {
    s << "<p><code>" << html_escape(text_or_empty(sc["model"], "formula")) << "</code></p>\n<ul>\n";
    for (const auto& a : sc["model"].value("assumptions", nlohmann::json::array())) {
      if (a.is_string()) s << "<li>" << html_escape(a.get<std::string>()) << "</li>\n";
    }
    s << "</ul>\n";
  }
  if (sc.contains("model_error"))
    s << "<p class=\"fail\">" << html_escape(text_or_empty(sc, "model_error")) << "</p>\n";
  s << "<table><tr><th>world</th><th>role</th><th>measured step s</th><th>predicted step s</th><th>error</th>"
       "<th>measured compute s</th><th>predicted compute s</th><th>measured comm s</th><th>predicted comm "
       "s</th></tr>\n";
  for (const auto& v : sc.value("validation", nlohmann::json::array())) {
    std::string role = v.value("calibration", false) ? "calibration" : "held out";
    if (v.value("oversubscribed", false)) role += ", oversubscribed";
    s << "<tr><td>" << number(number_or_zero(v, "world_size"), "%.0f") << "</td><td>" << role << "</td><td>"
      << number(number_or_zero(v, "measured_step_seconds")) << "</td><td>"
      << number(number_or_zero(v, "predicted_step_seconds")) << "</td><td>"
      << number(100 * number_or_zero(v, "step_relative_error"), "%+.0f%%") << "</td><td>"
      << number(number_or_zero(v, "measured_compute_seconds")) << "</td><td>"
      << number(number_or_zero(v, "predicted_compute_seconds")) << "</td><td>"
      << number(number_or_zero(v, "measured_communication_seconds")) << "</td><td>"
      << number(number_or_zero(v, "predicted_communication_seconds")) << "</td></tr>\n";
  }
  s << "</table>\n";
}

}  // namespace

std::string svg_bar_chart(const std::string& title, const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& unit) {
  constexpr int kLabel = 70, kBarMax = 260, kRow = 22, kTop = 24;
  double largest = 0;
  for (const auto& [label, value] : bars) largest = std::max(largest, std::isfinite(value) ? value : 0.0);
  const int height = kTop + kRow * static_cast<int>(bars.size()) + 6;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kLabel + kBarMax + 90 << "\" height=\""
    << height << "\" role=\"img\" aria-label=\"" << html_escape(title)
    << "\"><text x=\"0\" y=\"16\" font-weight=\"bold\">" << html_escape(title) << "</text>";
  int y = kTop;
  for (const auto& [label, value] : bars) {
    const double v = std::isfinite(value) && value > 0 ? value : 0;
    const int width = largest > 0 ? static_cast<int>(std::lround(kBarMax * v / largest)) : 0;
    s << "<text x=\"0\" y=\"" << y + 14 << "\">" << html_escape(label) << "</text><rect x=\"" << kLabel
      << "\" y=\"" << y + 3 << "\" width=\"" << width << "\" height=\"" << kRow - 6
      << "\" fill=\"#4a78c2\"/><text x=\"" << kLabel + width + 4 << "\" y=\"" << y + 14 << "\">"
      << html_escape(number(value, "%.3g") + " " + unit) << "</text>";
    y += kRow;
  }
  s << "</svg>";
  return s.str();
}

std::string render_pilot_html(const nlohmann::json& report) {
  std::ostringstream s;
  s << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ckptcheck "
       "pilot</title>\n<style>\n"
    << "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}"
    << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
    << "th:first-child,td:first-child{text-align:left}.ok{color:#145a1f}.fail{color:#7a1111;font-weight:bold}"
    << ".note{color:#555;font-size:.9em}.charts svg{margin-right:2em;font-size:12px}\n</style></head><body>\n"
    << "<h1>ckptcheck pilot</h1>\n<p>config <code>" << html_escape(text_or_empty(report, "config_path"))
    << "</code>, " << number(number_or_zero(report, "steps"), "%.0f") << " steps per run, "
    << number(number_or_zero(report, "cores"), "%.0f") << " cores</p>\n";
  if (report.contains("matrix") && report["matrix"].is_object()) render_matrix(s, report["matrix"]);
  if (report.contains("scaling") && report["scaling"].is_object()) render_scaling(s, report["scaling"]);
  s << "</body></html>\n";
  return s.str();
}

}  // namespace ckpt
