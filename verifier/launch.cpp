#include "verifier/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace ckpt {

namespace {

volatile sig_atomic_t g_forward_signal = 0;

void remember_signal(int sig) {
  g_forward_signal = sig;
}

// Restores the previous handlers when the launch ends.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_forward_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = remember_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Only async-signal-safe calls between fork and exec.
pid_t spawn_rank(const LaunchOptions& o, int rank, int port) {
  std::vector<std::string> env_strings = {
      "RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(o.nproc_per_node), "MASTER_ADDR=" + o.master_addr,
      "MASTER_PORT=" + std::to_string(port)};
  std::vector<char*> argv;
  for (const std::string& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
  for (std::string& kv : env_strings) ::putenv(kv.data());
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

}  // namespace

const char* signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGPIPE: return "SIGPIPE";
    case SIGHUP: return "SIGHUP";
    default: return "signal";
  }
}

bool LaunchOutcome::all_ok() const {
  for (const RankExit& r : ranks) {
    if (!r.exit.exited || r.exit.exit_code != 0) return false;
  }
  return !ranks.empty();
}

std::vector<std::string> LaunchOutcome::report_lines() const {
  std::vector<std::string> lines;
  for (const RankExit& r : ranks) {
    std::string what;
    if (r.exit.exited) {
      what = "exit " + std::to_string(r.exit.exit_code);
    } else if (r.exit.signaled) {
      what = std::string("killed by ") + signal_name(r.exit.signal);
      if (std::strcmp(signal_name(r.exit.signal), "signal") == 0) what += " " + std::to_string(r.exit.signal);
    } else {
      what = "unknown end";
    }
    if (r.stopped_by_launcher) what += " (stopped after another rank failed)";
    lines.push_back("rank " + std::to_string(r.rank) + ": " + what);
  }
  return lines;
}

Result<int> pick_free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::io_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return Status::io_error("cannot bind a loopback port: " + err);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<LaunchOutcome> launch_ranks(const LaunchOptions& o) {
  if (o.nproc_per_node < 1) return Status::invalid_argument("--nproc-per-node must be >= 1");
  if (o.argv.empty()) return Status::invalid_argument("launch: no command after --");
  LaunchOutcome out;
  out.master_port = o.master_port;
  if (out.master_port == 0) {
    CKPT_ASSIGN_OR_RETURN(out.master_port, pick_free_loopback_port());
  }
  SignalForwarding forwarding;
  std::vector<pid_t> pids;
  for (int r = 0; r < o.nproc_per_node; ++r) {
    const pid_t pid = spawn_rank(o, r, out.master_port);
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return Status::io_error(std::string("fork: ") + std::strerror(errno));
    }
    pids.push_back(pid);
    out.ranks.push_back({r, {}, false});
  }
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> failed_at;
  bool killed = false;
  size_t running = pids.size();
  while (running > 0) {
    if (g_forward_signal != 0) {
      const int sig = g_forward_signal;
      g_forward_signal = 0;
      for (size_t i = 0; i < pids.size(); ++i)
        if (pids[i] > 0) ::kill(pids[i], sig);
      if (!failed_at) failed_at = Clock::now();  // whoever ignores it is SIGKILLed after the grace
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      pids[i] = -1;
      --running;
      out.ranks[i].exit = ChildExit::from_wait_status(status);
      const bool ok = out.ranks[i].exit.exited && out.ranks[i].exit.exit_code == 0;
      if (!ok && !failed_at) failed_at = Clock::now();
    }
    // Peers of a dead rank normally fail on their own at the next collective; the grace period
    // lets them report why. Past it, a rank blocked elsewhere is SIGKILLed: the launch never hangs.
    if (failed_at && running > 0 && !killed &&
        std::chrono::duration<double>(Clock::now() - *failed_at).count() >= o.grace_seconds) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] <= 0) continue;
        ::kill(pids[i], SIGKILL);
        out.ranks[i].stopped_by_launcher = true;
      }
      killed = true;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return out;
}

}  // namespace ckpt
