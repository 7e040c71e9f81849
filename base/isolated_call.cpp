#include "base/isolated_call.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>

#include "base/byte_coding.h"

namespace ckpt {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The child's exit statuses other than 0 (success). Far from 1, which AddressSanitizer uses after a
// report, and from the shell's 126-128+n.
constexpr int kExitOutOfMemory = 120;
constexpr int kExitThrew = 121;
constexpr int kExitWriteFailed = 122;

// The output travels as an 8-byte little-endian length and then the bytes. The parent stops reading
// once it has them, never waiting for end-of-file: a sibling child forked meanwhile by another
// thread holds a copy of the pipe's write end until it exits.
constexpr size_t kLengthBytes = 8;

using Clock = std::chrono::steady_clock;

uint64_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  if (!(statm >> pages)) return 0;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void run_child(int out_fd, const std::function<std::string()>& fn, const IsolationLimits& limits,
                            uint64_t parent_address_space) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the parent
  // The parent's handlers for these (signal forwarding, cleanup) act on the parent's state; a
  // Ctrl-C reaching the whole process group should just end the child.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_DFL);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (limits.cpu_seconds > 0) {
    const rlimit cpu{limits.cpu_seconds, limits.cpu_seconds + 1};
    ::setrlimit(RLIMIT_CPU, &cpu);
  }
  if (!kAddressSanitizer && limits.extra_address_space_bytes > 0 && parent_address_space > 0) {
    const rlim_t cap = parent_address_space + limits.extra_address_space_bytes;
    const rlimit as{cap, cap};
    ::setrlimit(RLIMIT_AS, &as);
  }
  std::string out;
  try {
    out = fn();
  } catch (const std::bad_alloc&) {
    ::_exit(kExitOutOfMemory);
  } catch (...) {
    ::_exit(kExitThrew);
  }
  uint8_t length[kLengthBytes];
  encode_le64(length, out.size());
  if (!write_all(out_fd, length, sizeof length) || !write_all(out_fd, out.data(), out.size())) {
    ::_exit(kExitWriteFailed);
  }
  ::_exit(0);
}

std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

std::string describe_exit(int status, const IsolationLimits& limits) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGXCPU) return "exceeded its CPU limit (" + std::to_string(limits.cpu_seconds) + " s)";
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? std::string("killed by SIG") + abbrev : "killed by signal " + std::to_string(sig);
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  switch (code) {
    case kExitOutOfMemory:
      return "ran out of memory (limit " + std::to_string(limits.extra_address_space_bytes >> 20) +
             " MiB above the parent)";
    case kExitThrew: return "ended by an exception";
    case kExitWriteFailed: return "could not write its output";
    default: return "exited with status " + std::to_string(code);
  }
}

// Reaps `pid`, SIGKILLing it once `deadline` has passed. Returns false on a timeout.
// A child that has sent its whole output is usually still tearing down its copy of our address
// space (milliseconds for a parent holding GiBs of tensors): a pidfd wakes us the moment it is
// done, where sleeping between polls would overshoot by up to the last pause.
bool reap_by(pid_t pid, Clock::time_point deadline, int* status) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    for (;;) {  // readable once the child has exited, or at the deadline
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{pidfd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left) + 1)) >= 0 || errno != EINTR) break;
    }
    ::close(pidfd);
  }
  auto pause = std::chrono::microseconds(100);
  for (;;) {
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // not our child any more: nothing to wait for
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
    const timespec ts{0, static_cast<long>(std::chrono::nanoseconds(pause).count())};
    ::nanosleep(&ts, nullptr);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
}

// Forks the child that runs `fn` (under `limits`) and writes its result down a pipe. Returns the
// child's pid and the pipe's read end, non-blocking.
Result<std::pair<pid_t, int>> fork_isolated_child(const std::function<std::string()>& fn,
                                                  const IsolationLimits& limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status::io_error(std::string("isolated call: cannot create a pipe: ") + std::strerror(errno));
  }
  const uint64_t parent_address_space = address_space_bytes();
  pid_t pid;
  {
    // fork() never happens while another thread is inside a library with a global lock that the
    // child would find held forever (isolated_call.h).
    std::unique_lock<std::mutex> lock;
    if (limits.fork_lock) lock = std::unique_lock<std::mutex>(*limits.fork_lock);
    pid = ::fork();
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(fds[1], fn, limits, parent_address_space);
  }
  const int fork_errno = errno;
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return Status::io_error(std::string("isolated call: cannot fork: ") + std::strerror(fork_errno));
  }
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return std::make_pair(pid, fds[0]);
}

// What came down the pipe: a little-endian length, then that many bytes.
struct ChildOutput {
  std::string received;
  uint64_t announced = 0;  // valid once received holds the length
  bool timed_out = false, too_large = false, reaped = false;
  int status = 0;  // the child's wait status, when reaped
};

// Reads the child's output until it is whole, the pipe closes, the deadline passes or it outgrows
// `max_bytes`. Closes `in`.
ChildOutput read_child_output(int in, pid_t pid, Clock::time_point deadline, uint64_t max_bytes) {
  ChildOutput out;
  for (;;) {
    const bool have_length = out.received.size() >= kLengthBytes;
    if (have_length) {
      out.announced = decode_le64(reinterpret_cast<const uint8_t*>(out.received.data()));
      if (out.announced > max_bytes || out.received.size() - kLengthBytes > out.announced) {
        out.too_large = true;
        break;
      }
      if (out.received.size() - kLengthBytes == out.announced) break;
    }
    char buf[64 << 10];
    const ssize_t n = ::read(in, buf, sizeof buf);
    if (n > 0) {
      out.received.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;  // end of file: every writer is gone
    if (errno == EINTR) continue;
    if (errno != EAGAIN) break;
    if (out.reaped) break;  // drained after the child ended
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd p{in, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 50))) == 0) {
      // Nothing arrived: the child may have died while a sibling keeps the pipe open.
      out.reaped = ::waitpid(pid, &out.status, WNOHANG) == pid;
    }
  }
  ::close(in);
  return out;
}

}  // namespace

bool built_with_address_sanitizer() {
  return kAddressSanitizer;
}

Result<IsolatedOutcome> run_isolated(const std::function<std::string()>& fn, const IsolationLimits& limits) {
  CKPT_ASSIGN_OR_RETURN(auto child, fork_isolated_child(fn, limits));
  const pid_t pid = child.first;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(limits.wall_seconds));
  ChildOutput got = read_child_output(child.second, pid, deadline, limits.max_output_bytes);
  IsolatedOutcome outcome;
  if (got.timed_out || got.too_large) {
    ::kill(pid, SIGKILL);
    if (!got.reaped) {
      while (::waitpid(pid, &got.status, 0) < 0 && errno == EINTR) {
      }
    }
    outcome.failure = got.timed_out ? "exceeded " + seconds_text(limits.wall_seconds) + " s"
                                    : "wrote more than " + std::to_string(limits.max_output_bytes) + " bytes";
    return outcome;
  }
  if (!got.reaped && !reap_by(pid, deadline, &got.status)) {
    outcome.failure = "exceeded " + seconds_text(limits.wall_seconds) + " s";
    return outcome;
  }
  const bool exited_ok = WIFEXITED(got.status) && WEXITSTATUS(got.status) == 0;
  if (!exited_ok) {
    outcome.failure = describe_exit(got.status, limits);
    return outcome;
  }
  if (got.received.size() < kLengthBytes || got.received.size() - kLengthBytes != got.announced) {
    outcome.failure = "exited without its whole output (" + std::to_string(got.received.size()) + " bytes)";
    return outcome;
  }
  outcome.completed = true;
  outcome.output = got.received.substr(kLengthBytes);
  return outcome;
}

}  // namespace ckpt
