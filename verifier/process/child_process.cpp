#include "verifier/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "base/open_file_limit.h"
#include "verifier/process/drill_hooks.h"

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

// A descriptor that becomes readable when the process exits (pidfd_open, Linux 5.3); -1 where the
// kernel has none, and wait() polls instead.
struct ExitDescriptor {
  explicit ExitDescriptor(pid_t pid) : fd(static_cast<int>(::syscall(kPidfdOpen, pid, 0))) {}
  ~ExitDescriptor() {
    if (fd >= 0) ::close(fd);
  }
  ExitDescriptor(const ExitDescriptor&) = delete;
  ExitDescriptor& operator=(const ExitDescriptor&) = delete;
#ifdef SYS_pidfd_open
  static constexpr long kPidfdOpen = SYS_pidfd_open;
#else
  static constexpr long kPidfdOpen = 434;  // the same number on every architecture
#endif
  int fd;
};

}  // namespace

Result<std::string> current_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return Status::io_error(std::string("/proc/self/exe: readlink: ") + std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

namespace {

// Opens a log for appending; -1 (no error) for "", which means inherit.
Result<int> open_log(const std::string& path) {
  if (path.empty()) return -1;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(path + ": open: " + std::strerror(errno));
  return fd;
}

void close_all(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

// The child's environment: this process's, less `unset`, with `set` ("NAME=value") on top.
std::vector<std::string> child_environment(const std::vector<std::string>& set,
                                           const std::vector<std::string>& unset) {
  auto name_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  std::vector<std::string> names = unset;
  for (const std::string& kv : set) names.push_back(name_of(kv));
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (std::find(names.begin(), names.end(), name_of(kv)) == names.end()) env.push_back(kv);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return Status::invalid_argument("spawn: empty argv");
  // Everything the child needs is prepared before vfork: the child shares this process's memory
  // until it execs, so it only makes system calls, touching nothing of ours.
  std::vector<char*> args;
  for (const auto& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = child_environment(o.env, o.unset_env);
  std::vector<char*> envp;
  for (std::string& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  CKPT_ASSIGN_OR_RETURN(const int out_log, open_log(o.stdout_log));
  auto err_opened = open_log(o.stderr_log);
  if (!err_opened.is_ok()) {
    close_all({out_log});
    return err_opened.status();
  }
  const int err_log = *err_opened;
  int pipe_fds[2] = {-1, -1};
  if (o.pipe_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close_all({out_log, err_log});
    return Status::io_error(std::string("pipe: ") + std::strerror(errno));
  }
  // In memory, not registers: the child runs on this stack frame until it execs.
  volatile const int out = o.pipe_stdout ? pipe_fds[1] : out_log;
  const pid_t parent = ::getpid();
  // vfork, not fork: fork copies the page tables of everything mapped here (libtorch, a bench's
  // tensors), milliseconds that would count as the child's start-up. Signals stay blocked until
  // the child has put every handler back to its default, so none of ours runs in the child.
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::vfork();
  if (pid == 0) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction current {};
      if (sig != SIGKILL && sig != SIGSTOP && ::sigaction(sig, nullptr, &current) == 0 &&
          current.sa_handler != SIG_IGN && current.sa_handler != SIG_DFL)
        ::sigaction(sig, &default_action, nullptr);
    }
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died between vfork and prctl
    if (out >= 0) ::dup2(out, STDOUT_FILENO);
    if (err_log >= 0) ::dup2(err_log, STDERR_FILENO);
    restore_open_file_limit();  // the program runs under the limits this process was given
    if (o.search_path)
      ::execvpe(args[0], args.data(), envp.data());
    else
      ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  const int vfork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    close_all({out_log, err_log, pipe_fds[0], pipe_fds[1]});
    return Status::io_error(std::string("vfork: ") + std::strerror(vfork_errno));
  }
  ChildProcess child;
  child.pid_ = pid;
  child.stderr_log_ = o.stderr_log;
  close_all({err_log});
  if (o.pipe_stdout) {
    ::close(pipe_fds[1]);
    child.stdout_fd_ = pipe_fds[0];
    child.stdout_log_fd_ = out_log;
  } else {
    close_all({out_log});
  }
  return child;
}

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv, const std::string& stdout_log,
                                         const std::string& stderr_log, bool pipe_stdout) {
  SpawnOptions o;
  o.argv = argv;
  o.env = {"CKPTCHECK_NO_PROGRESS=1"};
  o.stdout_log = stdout_log;
  o.stderr_log = stderr_log;
  o.pipe_stdout = pipe_stdout;
  return spawn(o);
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

ChildExit ChildProcess::reap(int wait_status, const struct rusage& usage) {
  pid_ = -1;
  ChildExit e = ChildExit::from_wait_status(wait_status);
  e.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
  return e;
}

ChildExit ChildProcess::kill_and_reap() {
  if (pid_ <= 0) return {};
  ::kill(pid_, SIGKILL);
  int status = 0;
  struct rusage usage {};
  while (::wait4(pid_, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  return reap(status, usage);
}

bool ChildProcess::try_reap(ChildExit* exit) {
  if (pid_ <= 0) return false;
  int status = 0;
  struct rusage usage {};
  if (::wait4(pid_, &status, WNOHANG, &usage) != pid_) return false;
  *exit = reap(status, usage);
  return true;
}

bool ChildProcess::has_ended() const {
  if (pid_ <= 0) return true;
  siginfo_t info{};
  // WNOWAIT: look without reaping. si_pid stays 0 while the child runs.
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  return info.si_pid == pid_;
}

void ChildProcess::send_signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

ChildExit ChildProcess::wait(double timeout_seconds, const std::function<void()>& tick) {
  if (pid_ <= 0) return {};
  const auto deadline = deadline_after(timeout_seconds);
  const ExitDescriptor exit_fd(pid_);
  constexpr auto kTickInterval = std::chrono::milliseconds(200);
  auto next_tick = Clock::now();
  for (;;) {
    if (tick && Clock::now() >= next_tick) {
      tick();
      next_tick = Clock::now() + kTickInterval;
    }
    int status = 0;
    struct rusage usage {};
    const pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
    if (r == pid_) {
      // Drains what the child wrote before it exited (bounded: a grandchild could hold the pipe).
      for (int i = 0; i < 4096 && stdout_fd_ >= 0; ++i)
        if (!pump_stdout(0)) break;
      return reap(status, usage);
    }
    if (Clock::now() >= deadline) {
      ChildExit e = kill_and_reap();
      e.timed_out = true;
      return e;
    }
    // With a tick to call, wake at least as often as it is due.
    const int wait_ms = tick ? std::min<int>(ms_until(deadline), 200) : ms_until(deadline);
    if (exit_fd.fd >= 0) {
      // Wakes the moment the child exits (or writes), so a timed child is not charged a poll interval.
      pollfd fds[2] = {{exit_fd.fd, POLLIN, 0}, {stdout_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, stdout_fd_ >= 0 ? 2 : 1, wait_ms);
      // Data, end of file or an error on stdout: pump_stdout reads it, or closes the pipe.
      if (ready > 0 && stdout_fd_ >= 0 && fds[1].revents != 0) pump_stdout(0);
    } else if (stdout_fd_ >= 0) {
      pump_stdout(wait_ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
