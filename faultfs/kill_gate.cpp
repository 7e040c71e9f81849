#include "faultfs/kill_gate.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace ckpt::faultfs {
namespace {

std::string mount_path(const std::string& relative) {
  std::string p = relative;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p.empty() || p[0] != '/' ? "/" + p : p;
}

bool parse_step(const std::string& text, int64_t* step) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) return false;
  *step = v;
  return true;
}

}  // namespace

Status KillGate::arm(const std::string& spec) {
  std::istringstream in(spec);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  const bool after = words.size() == 3 && words[0] == "after-save";
  const bool during = words.size() == 4 && words[0] == "during-save";
  const bool after_step = words.size() == 3 && words[0] == "after-step";
  const bool first_change = words.size() == 2 && words[0] == "first-change";
  int64_t step = 0;
  if ((!after && !during && !after_step && !first_change) ||
      (!first_change && !parse_step(words.back(), &step)))
    return Status::invalid_argument(
        "gate takes `after-save METRICS STEP`, `during-save METRICS CKPT_DIR STEP`, `after-step METRICS "
        "STEP` or `first-change CKPT_DIR`, got `" +
        spec + "`");
  std::lock_guard<std::mutex> lock(mu_);
  mode_ = after ? Mode::kAfterEvent : after_step ? Mode::kAfterStep : Mode::kFirstSaveChange;
  // first-change watches no metrics file: "" is no path the mount ever names.
  metrics_ = first_change ? "" : mount_path(words[1]);
  ckpt_dir_ = during ? mount_path(words[2]) : first_change ? mount_path(words[1]) : "";
  step_ = step;
  event_seen_ = step <= 0;
  armed_ = first_change;  // armed at once: the drill arms it at the moment it means
  partial_.clear();
  held_ = released_ = false;
  what_.clear();
  return Status::ok();
}

bool KillGate::feed_metrics(const char* data, size_t size, std::string* line_out) {
  partial_.append(data, size);
  bool reached = false;
  size_t start = 0, end;
  while ((end = partial_.find('\n', start)) != std::string::npos) {
    const std::string line = partial_.substr(start, end - start);
    start = end + 1;
    if (reached) continue;  // the rest of this write is the program's; the kill point is passed
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t step = j["step"].get<int64_t>();
    const bool event = j.contains("event") && j["event"] == "checkpoint";
    if (mode_ == Mode::kAfterEvent) {
      reached = event && step == step_;
    } else if (event) {
      event_seen_ = event_seen_ || step == step_;
    } else if (mode_ == Mode::kAfterStep) {
      reached = event_seen_ && step > step_;  // during-save's arming moment, held itself
    } else {
      armed_ = armed_ || (event_seen_ && step > step_);
    }
    if (reached) *line_out = line;
  }
  partial_.erase(0, start);
  if (partial_.size() > (1u << 20)) partial_.clear();  // a runaway line is not an event
  return reached;
}

bool KillGate::under_checkpoint_dir(const std::string& path) const {
  if (ckpt_dir_ == "/") return path.size() > 1;  // the mount's root: everything on it
  return path.size() > ckpt_dir_.size() + 1 && path.compare(0, ckpt_dir_.size(), ckpt_dir_) == 0 &&
         (ckpt_dir_ == "/" || path[ckpt_dir_.size()] == '/');
}

void KillGate::hold(std::unique_lock<std::mutex>& lock, std::string what) {
  held_ = true;
  what_ = std::move(what);
  mode_ = Mode::kOff;
  cv_.notify_all();
  // The request stays unanswered until the drill has sent its SIGKILL and releases it; a daemon
  // asked to stop lets it go, so its loop can end and unmount.
  while (!released_ && !(stopping_ && stopping_())) cv_.wait_for(lock, std::chrono::milliseconds(50));
}

void KillGate::after_write(const std::string& path, const char* data, size_t size) {
  std::unique_lock<std::mutex> lock(mu_);
  if (mode_ == Mode::kOff) return;
  if (path == metrics_) {
    std::string line;
    if (feed_metrics(data, size, &line))
      hold(lock, nlohmann::json{{"op", "write"}, {"path", path}, {"line", line}}.dump());
    return;
  }
  if (mode_ == Mode::kFirstSaveChange && armed_ && under_checkpoint_dir(path))
    hold(lock, nlohmann::json{{"op", "write"}, {"path", path}}.dump());
}

void KillGate::after_change(const char* op, const std::string& path) {
  std::unique_lock<std::mutex> lock(mu_);
  if (mode_ == Mode::kFirstSaveChange && armed_ && under_checkpoint_dir(path))
    hold(lock, nlohmann::json{{"op", op}, {"path", path}}.dump());
}

std::optional<std::string> KillGate::wait_held(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return held_ && !released_; });
  if (held_ && !released_) return what_;
  return std::nullopt;
}

void KillGate::release() {
  std::lock_guard<std::mutex> lock(mu_);
  released_ = true;
  mode_ = Mode::kOff;
  cv_.notify_all();
}

}  // namespace ckpt::faultfs
