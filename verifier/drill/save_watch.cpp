#include "verifier/drill/save_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/json_fields.h"

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

WatchOutcome kill_after_checkpoint(RunningProgram& child, const std::string& metrics, int64_t step,
                                   double timeout_seconds, const StepObserver& on_step) {
  WatchOutcome out;
  MetricsTail tail(metrics);
  int64_t shown = -1;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (Clock::now() < deadline) {
    if (tail.poll_for_checkpoint(step, &out.event)) {
      out.exit = child.kill_and_reap();
      out.triggered = true;
      return out;
    }
    if (on_step && tail.last_step() > shown) on_step(shown = tail.last_step());
    ChildExit ended;
    if (child.try_reap(&ended)) {
      out.exit = ended;  // it ended on its own: the kill never happened
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  out.exit = child.kill_and_reap();
  out.exit.timed_out = true;
  return out;
}

Result<WatchOutcome> kill_during_save(RunningProgram& child, const std::string& metrics,
                                      const std::string& ckpt_dir, int64_t armed_after_step,
                                      double timeout_seconds, const StepObserver& on_step) {
  WatchOutcome out;
  MetricsTail tail(metrics);
  int64_t shown = -1;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Status::io_error(std::string("inotify_init1: ") + std::strerror(errno));
  // Watching from the start, events before the arming are drained and ignored: no creation that
  // happens right after the arming event can be missed.
  const int wd = ::inotify_add_watch(fd, ckpt_dir.c_str(), IN_CREATE | IN_MOVED_TO);
  if (wd < 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::io_error(ckpt_dir + ": inotify_add_watch: " + why);
  }
  bool armed = armed_after_step <= 0;
  alignas(inotify_event) char buf[4096];
  while (Clock::now() < deadline) {
    if (!armed && tail.poll_for_checkpoint(armed_after_step, &out.event)) {
      armed = true;
      while (::read(fd, buf, sizeof(buf)) > 0) {  // creations up to the arming event belong to it
      }
    }
    if (on_step && tail.last_step() > shown) on_step(shown = tail.last_step());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, armed ? 50 : 2) > 0) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (armed && n > 0) {
        out.exit = child.kill_and_reap();
        const auto* ev = reinterpret_cast<const inotify_event*>(buf);
        out.created = ev->len > 0 ? std::string(ev->name) : "?";
        out.triggered = true;
        break;
      }
    }
    ChildExit ended;
    if (child.try_reap(&ended)) {
      out.exit = ended;
      break;
    }
  }
  if (!out.triggered && child.running()) {
    out.exit = child.kill_and_reap();
    out.exit.timed_out = true;
  }
  ::close(fd);
  return out;
}

}  // namespace ckpt
