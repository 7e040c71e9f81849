#include "verifier/drill/save_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/json_fields.h"
#include "verifier/check/seal.h"

namespace ckpt {
namespace {

using Clock = std::chrono::steady_clock;

// Checkpoint event lines only; everything else in the file is the step log.
bool parse_event(const std::string& line, CheckpointEvent* e) {
  if (line.find("\"event\"") == std::string::npos) return false;
  auto j = parse_json(line, "metrics line");
  if (!j.is_ok() || !j->is_object() || j->value("event", std::string()) != "checkpoint") return false;
  auto step = j->find("step");
  auto path = j->find("path");
  if (step == j->end() || !step->is_number_integer() || path == j->end() || !path->is_string()) return false;
  e->step = step->get<int64_t>();
  e->path = path->get<std::string>();
  return true;
}

// The "step" of a step line, for progress only (read_metrics_log is the strict reader); -1 if none.
int64_t step_of_line(const std::string& line) {
  if (line.find("\"step\"") == std::string::npos) return -1;
  auto j = parse_json(line, "metrics line");
  if (!j.is_ok() || !j->is_object()) return -1;
  auto step = j->find("step");
  return step != j->end() && step->is_number_integer() ? step->get<int64_t>() : -1;
}

}  // namespace

bool MetricsTail::poll_for_checkpoint(int64_t step, CheckpointEvent* found) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[65536];
  bool seen = false;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(offset_));
    if (n <= 0) break;
    offset_ += static_cast<uint64_t>(n);
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0, end;
    while ((end = partial_.find('\n', start)) != std::string::npos) {
      CheckpointEvent e;
      const std::string line = partial_.substr(start, end - start);
      if (on_line_) on_line_(line);
      if (parse_event(line, &e)) {
        if (e.step == step && !seen) {
          e.path = resolve_announced_path(e.path, checkpoint_dir_);
          *found = e;
          seen = true;
        }
      } else {
        last_step_ = std::max(last_step_, step_of_line(line));
      }
      start = end + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > (1u << 20)) partial_.clear();  // a runaway line is not an event
  }
  ::close(fd);
  return seen;
}

std::string describe_save_trigger(const WatchOutcome& w) {
  const std::string& op = w.trigger_op;
  const bool names = op == "create" || op == "mkdir" || op == "rename" || op == "link" || op == "symlink";
  return (names ? std::string("creation") : op) + " of " + w.created;
}

WatchOutcome kill_after_checkpoint(RunningProgram& child, const std::string& metrics,
                                   const std::string& ckpt_dir, int64_t step, double timeout_seconds,
                                   const StepObserver& on_step) {
  WatchOutcome out;
  MetricsTail tail(metrics, ckpt_dir);
  int64_t shown = -1;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (Clock::now() < deadline) {
    if (tail.poll_for_checkpoint(step, &out.event)) {
      // Looked at before the kill: a program that announces a checkpoint before its save returns
      // breaks the contract even when the save would have finished a moment later.
      struct stat st;
      out.event_path_existed = ::stat(out.event.path.c_str(), &st) == 0;
      out.exit = child.kill_and_reap();
      out.triggered = true;
      out.last_step = tail.last_step();
      return out;
    }
    if (on_step && tail.last_step() > shown) on_step(shown = tail.last_step());
    ChildExit ended;
    if (child.try_reap(&ended)) {
      out.exit = ended;  // it ended on its own: the kill never happened
      out.last_step = tail.last_step();
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  out.exit = child.kill_and_reap();
  out.exit.timed_out = true;
  out.last_step = tail.last_step();
  return out;
}

namespace {

// The names created or written in the watched dir, in the order the kernel queued them
// (nonblocking); a write (IN_MODIFY: a write or a truncate) is marked by kWrittenMark before the name.
constexpr char kWrittenMark = '\x01';
std::vector<std::string> read_created_names(int fd) {
  std::vector<std::string> names;
  alignas(inotify_event) char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return names;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
      const std::string name = ev->len > 0 ? std::string(ev->name) : "?";
      names.push_back((ev->mask & IN_MODIFY) ? kWrittenMark + name : name);
      at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

// The name directly under `dir` that `path` lies in ("step_4" for DIR/step_4/model.pt); "" if
// `path` is not inside `dir`.
std::string top_name_under(const std::string& dir, const std::string& path) {
  const std::filesystem::path rel = std::filesystem::path(path).lexically_normal().lexically_relative(
      std::filesystem::path(dir).lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return "";
  return rel.begin()->string();
}

std::string plain_name(const std::string& queued) {
  return !queued.empty() && queued[0] == kWrittenMark ? queued.substr(1) : queued;
}

// `name` is the seal of the checkpoint file `checkpoint`, or that seal's signature.
bool is_companion_of(const std::string& checkpoint, const std::string& name) {
  if (checkpoint.empty()) return false;
  const std::string seal = checkpoint + kSealFileSuffix;
  return name == seal || name == seal + ".sig";
}

}  // namespace

Result<WatchOutcome> kill_during_save(RunningProgram& child, const std::string& metrics,
                                      const std::string& ckpt_dir, int64_t armed_after_step,
                                      double timeout_seconds, const StepObserver& on_step) {
  WatchOutcome out;
  MetricsTail tail(metrics, ckpt_dir);
  int64_t shown = -1;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Status::io_error(std::string("inotify_init1: ") + std::strerror(errno));
  // Watching from the start: every creation is queued in order, so the ones of the arming save
  // can be told from the next save's however late the arming event is read. Writes too: a save in
  // place (latest.ckpt overwritten) creates no name, its first write or truncate begins it.
  const int wd = ::inotify_add_watch(fd, ckpt_dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_MODIFY);
  if (wd < 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::io_error(ckpt_dir + ": inotify_add_watch: " + why);
  }
  const std::string metrics_name = std::filesystem::path(metrics).parent_path().lexically_normal() ==
                                           std::filesystem::path(ckpt_dir).lexically_normal()
                                       ? std::filesystem::path(metrics).filename().string()
                                       : "";
  bool armed = armed_after_step <= 0;
  std::vector<std::string> before_arming;  // names created before the arming event was read
  std::vector<std::string> candidates;     // names created after the arming save, not yet judged
  std::string boundary;                    // the arming checkpoint's name directly under ckpt_dir
  while (Clock::now() < deadline && !out.triggered) {
    if (!armed && tail.poll_for_checkpoint(armed_after_step, &out.event)) {
      armed = true;
      for (auto& name : read_created_names(fd)) before_arming.push_back(std::move(name));
      // Everything up to the last appearance of the announced name belongs to that save; a
      // checkpoint announced outside the dir gives no boundary: all of it is taken as its own.
      boundary = top_name_under(ckpt_dir, out.event.path);
      const auto last = std::find_if(before_arming.rbegin(), before_arming.rend(),
                                     [&](const std::string& name) { return plain_name(name) == boundary; });
      if (!boundary.empty() && last != before_arming.rend())
        candidates.assign(last.base(), before_arming.end());
      before_arming.clear();
    }
    if (on_step && tail.last_step() > shown) on_step(shown = tail.last_step());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, armed && candidates.empty() ? 20 : 2) > 0) {
      for (auto& name : read_created_names(fd))
        (armed ? candidates : before_arming).push_back(std::move(name));
      if (before_arming.size() > 65536)
        before_arming.erase(before_arming.begin(), before_arming.end() - 4096);
    }
    // The arming checkpoint's own seal and signature (ckptcheck.torch.save renames them beside the
    // file after it) end that save; they are never the next save's first name.
    // Nor is the metrics file, when a program keeps it in its checkpoint dir.
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const std::string& name) {
                                      return is_companion_of(boundary, plain_name(name)) ||
                                             plain_name(name) == metrics_name;
                                    }),
                     candidates.end());
    if (armed && !candidates.empty()) {
      CheckpointEvent ignored;
      tail.poll_for_checkpoint(-1, &ignored);
      if (tail.last_step() > armed_after_step) {
        out.exit = child.kill_and_reap();
        out.created = plain_name(candidates.front());
        out.trigger_op = candidates.front()[0] == kWrittenMark ? "write" : "create";
        out.triggered = true;
        out.last_step = tail.last_step();
        break;
      }
      candidates.clear();  // written before the run trained on: the end of the arming save
    }
    ChildExit ended;
    if (child.try_reap(&ended)) {
      out.exit = ended;
      break;
    }
  }
  if (!out.triggered) out.last_step = tail.last_step();
  if (!out.triggered && child.running()) {
    out.exit = child.kill_and_reap();
    out.exit.timed_out = true;
  }
  ::close(fd);
  return out;
}

}  // namespace ckpt
