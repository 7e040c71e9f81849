#include "verifier/drill/drill_history.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/file_io.h"
#include "base/json_fields.h"

namespace ckpt {

namespace {

// Seconds as floating point and counts as integers, whatever mode wrote the report (a live drill and
// a drill from scratch write 26603 alike, never 26603.0 in one of them).
nlohmann::json seconds_or_null(const nlohmann::json& v) {
  return v.is_number() ? nlohmann::json(v.get<double>()) : nlohmann::json();
}
nlohmann::json count_or_null(const nlohmann::json& v) {
  return v.is_number() ? nlohmann::json(static_cast<int64_t>(std::llround(v.get<double>())))
                       : nlohmann::json();
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
          {"exit_code", count_or_null(json_member_or_null(report, "exit_code"))},
          {"save_at", count_or_null(json_member_or_null(drill, "save_at"))},
          {"resume_steps", count_or_null(json_member_or_null(drill, "resume_steps"))},
          {"checkpoint_bytes", count_or_null(json_member_or_null(timings, "checkpoint_bytes"))},
          {"snapshot_seconds", seconds_or_null(json_member_or_null(timings, "snapshot_seconds"))},
          {"restore_seconds", seconds_or_null(json_member_or_null(timings, "restore_seconds"))},
          {"resume_seconds", seconds_or_null(json_member_or_null(timings, "resume_seconds"))},
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

// The lines of a history file as the next writer keeps them: every complete line, and a last line
// without its newline (a crash mid-append) kept only when it is a whole JSON object.
static std::string lines_to_keep(const std::string& text) {
  const size_t last_newline = text.rfind('\n');
  const size_t tail_start = last_newline == std::string::npos ? 0 : last_newline + 1;
  std::string kept = text.substr(0, tail_start);
  const std::string tail = text.substr(tail_start);
  if (!tail.empty()) {
    const nlohmann::json j = nlohmann::json::parse(tail, nullptr, false);
    if (!j.is_discarded() && j.is_object()) kept += tail + "\n";
  }
  return kept;
}

Status append_drill_history(const std::string& path, const nlohmann::json& entry) {
  // One writer at a time (flock on the file, taken again when another writer renamed a new file over
  // it meanwhile); the whole file is rewritten beside it and renamed over it, so a crash at any
  // moment leaves the old file or the new one, never a torn line.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::io_error(path + ": open: " + std::strerror(errno));
    if (::flock(fd, LOCK_EX) != 0) {
      const int err = errno;
      ::close(fd);
      return Status::io_error(path + ": lock: " + std::strerror(err));
    }
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) != 0 || ::stat(path.c_str(), &now) != 0 || held.st_ino != now.st_ino ||
        held.st_dev != now.st_dev) {
      ::close(fd);  // another drill replaced the file while this one waited: lock the new one
      continue;
    }
    std::string text;
    char buf[65536];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        return Status::io_error(path + ": read: " + std::strerror(err));
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      at += n;
    }
    Status written = write_file_atomically(path, lines_to_keep(text) + entry.dump() + "\n");
    ::close(fd);  // the lock is held until the new file is in place
    return written;
  }
  return Status::io_error(path + ": another drill kept replacing the history file");
}

}  // namespace ckpt
