#include "verifier/drill/drill_junit.h"

#include <cstdio>
#include <set>
#include <sstream>

#include "base/file_io.h"

namespace ckpt {

namespace {

// XML 1.0 text and attribute values: the five escapes, and control characters (which XML 1.0
// cannot carry at all) as '?', so a program's stderr in a message never breaks the file.
std::string xml_escape(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (const char ch : in) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c < 0x20 && ch != '\n' && ch != '\t' ? '?' : ch;
    }
  }
  return out;
}

std::string string_at(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A check's own time ("0.412"), or "0" when the report has none.
std::string check_time(const nlohmann::json& c) {
  if (!c.is_object() || !c.contains("seconds") || !c["seconds"].is_number()) return "0";
  char t[32];
  std::snprintf(t, sizeof t, "%.3f", c["seconds"].get<double>());
  return t;
}

}  // namespace

std::string drill_junit_xml(const nlohmann::json& report) {
  const nlohmann::json checks =
      report.contains("checks") && report["checks"].is_array() ? report["checks"] : nlohmann::json::array();
  const std::string error = string_at(report, "error");
  const bool errored = report.value("exit_code", 0) == 2;
  // A skipped check (a warning: what it tests did not happen) is neither a pass nor a failure.
  const auto skipped_check = [](const nlohmann::json& c) { return c.value("skipped", false); };
  size_t failures = 0, skipped = 0;
  for (const auto& c : checks) {
    skipped += skipped_check(c) ? 1 : 0;
    failures += c.value("passed", true) || skipped_check(c) ? 0 : 1;
  }
  const size_t tests = checks.size() + (errored ? 1 : 0);
  double seconds = 0;
  if (report.contains("measurements") && report["measurements"].is_object()) {
    const auto& t = report["measurements"].value("timings", nlohmann::json::object());
    if (t.contains("drill_wall_seconds") && t["drill_wall_seconds"].is_number())
      seconds = t["drill_wall_seconds"];
  }
  const nlohmann::json drill =
      report.contains("drill") && report["drill"].is_object() ? report["drill"] : nlohmann::json::object();
  const bool live = string_at(drill, "mode") == "live";
  const std::string suite = live ? "ckptcheck.drill.live" : "ckptcheck.drill";
  char time[32];
  std::snprintf(time, sizeof time, "%.3f", seconds);
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"ckptcheck drill\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << (errored ? 1 : 0) << "\" time=\"" << time << "\">\n";
  x << "  <testsuite name=\"" << suite << "\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << (errored ? 1 : 0) << "\" skipped=\"" << skipped << "\" time=\"" << time << "\">\n";
  x << "    <properties>\n";
  x << "      <property name=\"verdict\" value=\"" << xml_escape(string_at(report, "verdict")) << "\"/>\n";
  if (!string_at(report, "headline").empty())
    x << "      <property name=\"cause\" value=\"" << xml_escape(string_at(report, "headline")) << "\"/>\n";
  for (const char* key : {"mode", "save_at", "resume_steps", "kill"})
    if (drill.contains(key) && !(live && std::string(key) == "kill"))
      x << "      <property name=\"" << key << "\" value=\""
        << xml_escape(drill[key].is_string() ? drill[key].get<std::string>() : drill[key].dump()) << "\"/>\n";
  x << "    </properties>\n";
  for (const auto& c : checks) {
    const std::string mode = string_at(c, "mode");
    x << "    <testcase classname=\"ckptcheck.drill" << (mode.empty() ? "" : "." + xml_escape(mode))
      << "\" name=\"" << xml_escape(string_at(c, "name")) << "\" time=\"" << check_time(c) << "\"";
    if (skipped_check(c)) {
      x << ">\n      <skipped message=\"" << xml_escape(string_at(c, "detail")) << "\"/>\n    </testcase>\n";
      continue;
    }
    // final_state names the rule that judged each component (numbers.rules), pass or fail.
    std::string rules;
    std::set<std::string> diverged;
    if (c.contains("numbers") && c["numbers"].is_object() && c["numbers"].contains("diverged_components") &&
        c["numbers"]["diverged_components"].is_array())
      for (const auto& d : c["numbers"]["diverged_components"])
        if (d.is_string()) diverged.insert(d.get<std::string>());
    if (c.contains("numbers") && c["numbers"].is_object() && c["numbers"].contains("rules") &&
        c["numbers"]["rules"].is_object())
      for (const auto& [component, rule] : c["numbers"]["rules"].items()) {
        const std::string r = rule.is_string() ? rule.get<std::string>() : rule.dump();
        // A diverged component failed its rule: say so, never "model: bit-exact" for it.
        rules += component + ": " + (diverged.count(component) ? "diverged (required " + r + ")" : r) + "\n";
      }
    const std::string system_out =
        rules.empty() ? "" : "      <system-out>" + xml_escape(rules) + "</system-out>\n";
    if (c.value("passed", true)) {
      x << (system_out.empty() ? "/>\n" : ">\n" + system_out + "    </testcase>\n");
      continue;
    }
    std::string message = string_at(c, "detail");
    // final_state says how many components diverged; the failure says which, and how.
    if (c.contains("numbers") && c["numbers"].is_object() && c["numbers"].contains("diverged") &&
        c["numbers"]["diverged"].is_array())
      for (const auto& d : c["numbers"]["diverged"])
        if (d.is_string()) message += "\n" + d.get<std::string>();
    const std::string first_line = message.substr(0, message.find('\n'));
    x << ">\n      <failure message=\"" << xml_escape(first_line) << "\" type=\""
      << xml_escape(string_at(c, "name")) << "\">" << xml_escape(message) << "</failure>\n"
      << system_out << "    </testcase>\n";
  }
  if (errored)
    x << "    <testcase classname=\"ckptcheck.drill\" name=\"drill\" time=\"" << time
      << "\">\n      <error message=\"" << xml_escape(error) << "\" type=\"error\">" << xml_escape(error)
      << "</error>\n    </testcase>\n";
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

Status write_drill_junit(const std::string& path, const nlohmann::json& report) {
  return write_file_atomically(path, drill_junit_xml(report));
}

}  // namespace ckpt
