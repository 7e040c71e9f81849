#include "verifier/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "verifier/drill_hooks.h"

namespace ckpt {
namespace {

// Captured stdout is bounded: a child that floods it cannot exhaust the drill's memory.
constexpr size_t kMaxCapturedBytes = 64u << 20;

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int ms_until(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms > 100 ? 100 : ms);
}

}  // namespace

std::string ChildExit::describe() const {
  if (timed_out) return "timed out (killed by the drill)";
  if (exited) return "exit " + std::to_string(exit_code);
  if (signaled) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "unknown end";
}

Result<std::string> current_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return Status::io_error(std::string("/proc/self/exe: readlink: ") + std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv, const std::string& stdout_log,
                                         const std::string& stderr_log, bool pipe_stdout) {
  if (argv.empty()) return Status::invalid_argument("spawn: empty argv");
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out_log = ::open(stdout_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out_log < 0) return Status::io_error(stdout_log + ": open: " + std::strerror(errno));
  const int err_log = ::open(stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_log < 0) {
    ::close(out_log);
    return Status::io_error(stderr_log + ": open: " + std::strerror(errno));
  }
  int pipe_fds[2] = {-1, -1};
  if (pipe_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(out_log);
    ::close(err_log);
    return Status::io_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out_log);
    ::close(err_log);
    if (pipe_stdout) ::close(pipe_fds[0]), ::close(pipe_fds[1]);
    return Status::io_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the drill died between fork and prctl
    ::dup2(pipe_stdout ? pipe_fds[1] : out_log, STDOUT_FILENO);
    ::dup2(err_log, STDERR_FILENO);
    ::setenv("CKPTCHECK_NO_PROGRESS", "1", 1);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ChildProcess child;
  child.pid_ = pid;
  child.stderr_log_ = stderr_log;
  ::close(err_log);
  if (pipe_stdout) {
    ::close(pipe_fds[1]);
    child.stdout_fd_ = pipe_fds[0];
    child.stdout_log_fd_ = out_log;
  } else {
    ::close(out_log);
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      stdout_fd_(other.stdout_fd_),
      stdout_log_fd_(other.stdout_log_fd_),
      captured_(std::move(other.captured_)),
      scanned_(other.scanned_),
      stderr_log_(std::move(other.stderr_log_)) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
  other.stdout_log_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) kill_and_reap();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (stdout_log_fd_ >= 0) ::close(stdout_log_fd_);
}

bool ChildProcess::pump_stdout(int timeout_ms) {
  if (stdout_fd_ < 0) return false;
  pollfd p{stdout_fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, timeout_ms);
  if (ready < 0 && errno == EINTR) return true;
  if (ready <= 0) return ready == 0;
  char buf[65536];
  const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    ::close(stdout_fd_);
    stdout_fd_ = -1;
    return false;
  }
  if (stdout_log_fd_ >= 0 && ::write(stdout_log_fd_, buf, static_cast<size_t>(n)) < 0) {
    // The log is a convenience copy; the captured text is what the drill reads.
  }
  if (captured_.size() < kMaxCapturedBytes) captured_.append(buf, static_cast<size_t>(n));
  return true;
}

Result<std::string> ChildProcess::wait_for_event(const std::string& kind, double timeout_seconds) {
  const std::string marker = std::string(kEventPrefix) + kind + " ";
  const auto deadline = deadline_after(timeout_seconds);
  for (;;) {
    // Only whole lines are searched; an event line is written with one fflush.
    size_t end;
    while ((end = captured_.find('\n', scanned_)) != std::string::npos) {
      const std::string line = captured_.substr(scanned_, end - scanned_);
      scanned_ = end + 1;
      if (line.compare(0, marker.size(), marker) == 0) return line.substr(marker.size());
    }
    if (stdout_fd_ < 0)
      return Status::not_found("child " + std::to_string(pid_) + " closed stdout before event '" + kind +
                               "'");
    if (Clock::now() >= deadline)
      return Status::io_error("child " + std::to_string(pid_) + ": no event '" + kind + "' within " +
                              std::to_string(static_cast<int>(timeout_seconds)) + " s");
    pump_stdout(ms_until(deadline));
  }
}

ChildExit ChildExit::from_wait_status(int wait_status) {
  ChildExit e;
  if (WIFEXITED(wait_status)) {
    e.exited = true;
    e.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    e.signaled = true;
    e.signal = WTERMSIG(wait_status);
  }
  return e;
}

ChildExit ChildProcess::reap(int wait_status) {
  pid_ = -1;
  return ChildExit::from_wait_status(wait_status);
}

ChildExit ChildProcess::kill_and_reap() {
  if (pid_ <= 0) return {};
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return reap(status);
}

ChildExit ChildProcess::wait(double timeout_seconds) {
  if (pid_ <= 0) return {};
  const auto deadline = deadline_after(timeout_seconds);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      // Drains what the child wrote before it exited (bounded: a grandchild could hold the pipe).
      for (int i = 0; i < 4096 && stdout_fd_ >= 0; ++i)
        if (!pump_stdout(0)) break;
      return reap(status);
    }
    if (Clock::now() >= deadline) {
      ChildExit e = kill_and_reap();
      e.timed_out = true;
      return e;
    }
    if (stdout_fd_ >= 0) {
      pump_stdout(ms_until(deadline));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

std::string log_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text)
    if (c == '\n') c = ' ';  // messages are one line
  return text;
}

}  // namespace ckpt
