#include "faultfs/fault_mount.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "base/file_io.h"
#include "faultfs/control_protocol.h"

namespace ckpt::faultfs {

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mountinfo(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = field[i + k];
        if (c < '0' || c > '7') octal = false;
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// The absolute, normalized path, symlinks of its parent resolved, without touching the path itself:
// a dead mount point cannot be stat()ed (ENOTCONN).
std::string absolute_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) return path;
  if (p.has_filename() == false) p = p.parent_path();
  auto parent = std::filesystem::canonical(p.parent_path(), ec);
  return ec ? p.string() : (parent / p.filename()).string();
}

std::string log_tail(const std::string& log) {
  auto text = read_small_file(log, 1 << 20);
  if (!text.is_ok()) return "(no log at " + log + ")";
  std::string s = text->c_str();
  if (s.size() > 2000) s = "..." + s.substr(s.size() - 2000);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? "(empty log " + log + ")" : s;
}

// Runs argv (argv[0] a full path) and waits for it; the exit status, or -1.
int run_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

bool is_mounted(const std::string& mountpoint, const std::string& type) {
  const std::string want = absolute_path(mountpoint);
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options [optional...] - type source super-options
    std::vector<std::string> fields;
    size_t at = 0;
    while (at <= line.size()) {
      size_t sp = line.find(' ', at);
      if (sp == std::string::npos) sp = line.size();
      fields.push_back(line.substr(at, sp - at));
      at = sp + 1;
    }
    if (fields.size() < 7 || unescape_mountinfo(fields[4]) != want) continue;
    if (type.empty()) return true;
    for (size_t i = 5; i + 1 < fields.size(); ++i)
      if (fields[i] == "-") {
        if (fields[i + 1] == type) return true;
        break;
      }
  }
  return false;
}

Status unmount_lazily(const std::string& mountpoint) {
  if (!is_mounted(mountpoint, "")) return Status::ok();
  int rc = run_and_wait({kFusermount, "-u", "-z", absolute_path(mountpoint)});
  if (rc != 0 && is_mounted(mountpoint, ""))
    return Status::io_error(std::string(kFusermount) + " -u -z " + mountpoint + " failed (exit " +
                            std::to_string(rc) + "); the mount is still there");
  return Status::ok();
}

Result<std::unique_ptr<FaultMount>> FaultMount::start(const FaultMountOptions& options) {
  if (::access(options.program.c_str(), X_OK) != 0)
    return Status::not_found("faultfs: cannot execute " + options.program + ": " + std::strerror(errno));
  if (::access("/dev/fuse", R_OK | W_OK) != 0)
    return Status::not_supported(std::string("faultfs needs /dev/fuse (read and write): ") +
                                 std::strerror(errno) +
                                 "; install fuse3 and run where FUSE mounts are allowed");
  if (::access(kFusermount, X_OK) != 0)
    return Status::not_supported(std::string("faultfs needs ") + kFusermount + " (Debian package fuse3)");
  CKPT_RETURN_IF_ERROR(make_directory(options.state_dir));
  const std::string mountpoint = absolute_path(options.mountpoint);
  const std::string state = absolute_path(options.state_dir);
  const std::string socket = state + "/control.sock";
  const std::string log = state + "/daemon.log";
  // A mount left by a daemon that died (ours or an earlier run's) answers nothing: detach it first.
  CKPT_RETURN_IF_ERROR(unmount_lazily(mountpoint));

  std::vector<std::string> argv = {options.program, "--backing",   absolute_path(options.backing_dir),
                                   "--state",       state,         "--control",
                                   socket,          "--root-name", options.root_name,
                                   mountpoint};
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Status::io_error(std::string("faultfs: fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls until exec: the parent may have threads.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  std::unique_ptr<FaultMount> mount(new FaultMount(pid, mountpoint, socket, log));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.mount_timeout_ms);
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      mount->pid_ = -1;
      (void)unmount_lazily(mountpoint);
      return Status::io_error("faultfs: " + options.program + " exited before mounting " + mountpoint + " (" +
                              (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                 : "signal " + std::to_string(WTERMSIG(status))) +
                              "): " + log_tail(log));
    }
    if (is_mounted(mountpoint) && send_control_command(socket, "ping", 2000).is_ok()) return mount;
    if (std::chrono::steady_clock::now() > deadline) {
      (void)mount->stop();
      return Status::io_error("faultfs: " + mountpoint + " not mounted after " +
                              std::to_string(options.mount_timeout_ms) + " ms: " + log_tail(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

FaultMount::~FaultMount() {
  (void)stop();
}

Status FaultMount::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 500 && !reaped; ++i) {
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno == ECHILD))
        reaped = true;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reaped) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
  }
  return unmount_lazily(mountpoint_);
}

Result<std::string> FaultMount::command(const std::string& line) const {
  return send_control_command(socket_, line);
}

}  // namespace ckpt::faultfs
