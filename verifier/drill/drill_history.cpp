#include "verifier/drill/drill_history.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/json_fields.h"

namespace ckpt {

namespace {

nlohmann::json number_or_null(const nlohmann::json& v) {
  return v.is_number() ? v : nlohmann::json();
}

}  // namespace

nlohmann::json drill_history_entry(const nlohmann::json& report, std::time_t now) {
  char iso[32];
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const nlohmann::json& drill = json_member_or_null(report, "drill");
  const nlohmann::json& timings = json_member_or_null(json_member_or_null(report, "measurements"), "timings");
  nlohmann::json max_abs = nlohmann::json::object();
  const nlohmann::json& checks = json_member_or_null(report, "checks");
  if (checks.is_array())
    for (const auto& c : checks) {
      const std::string name = json_member_or_null(c, "name").is_string() ? c["name"].get<std::string>() : "";
      const nlohmann::json& v = json_member_or_null(json_member_or_null(c, "numbers"), "max_abs");
      if (name.rfind("metric_", 0) != 0 || !v.is_number()) continue;
      const std::string field = name.substr(7);
      if (!max_abs.contains(field) || v.get<double>() > max_abs[field].get<double>()) max_abs[field] = v;
    }
  const std::string mode =
      json_member_or_null(drill, "mode").is_string() ? drill["mode"].get<std::string>() : "scratch";
  return {{"time", iso},
          {"mode", mode == "live" ? "live"
                                  : "scratch " + (json_member_or_null(drill, "kill").is_string()
                                                      ? drill["kill"].get<std::string>()
                                                      : "")},
          {"program", json_member_or_null(drill, "program")},
          {"verdict", json_member_or_null(report, "verdict")},
          {"exit_code", json_member_or_null(report, "exit_code")},
          {"save_at", json_member_or_null(drill, "save_at")},
          {"resume_steps", json_member_or_null(drill, "resume_steps")},
          {"checkpoint_bytes", number_or_null(json_member_or_null(timings, "checkpoint_bytes"))},
          {"snapshot_seconds", number_or_null(json_member_or_null(timings, "snapshot_seconds"))},
          {"restore_seconds", number_or_null(json_member_or_null(timings, "restore_seconds"))},
          {"resume_seconds", number_or_null(json_member_or_null(timings, "resume_seconds"))},
          {"max_abs", max_abs},
          {"failures", json_member_or_null(report, "failures").is_array() ? report["failures"].size() : 0}};
}

Result<std::vector<nlohmann::json>> read_drill_history(const std::string& path) {
  std::vector<nlohmann::json> entries;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0) return entries;
    return Status::io_error(path + ": cannot open the drill history");
  }
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  size_t start = 0, line = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    ++line;
    const std::string one = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (one.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(one, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (end == std::string::npos) break;  // torn last line
      return Status::corruption(path + ":" + std::to_string(line) +
                                ": expected one JSON object per line, got '" + one.substr(0, 60) + "'");
    }
    entries.push_back(std::move(j));
  }
  return entries;
}

Status append_drill_history(const std::string& path, const nlohmann::json& entry) {
  const std::string line = entry.dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(path + ": open for append: " + std::strerror(errno));
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  const int closed = ::close(fd);
  if (n != static_cast<ssize_t>(line.size()) || closed != 0)
    return Status::io_error(path + ": append: " + std::strerror(n < 0 ? err : errno));
  return Status::ok();
}

}  // namespace ckpt
