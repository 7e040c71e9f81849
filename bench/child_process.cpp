// Child processes for timing the CLI and the baseline tools. wait4 (not waitpid) because the
// memory row needs the child's own ru_maxrss, not this process's.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {

std::string command_line(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

[[noreturn]] void exec_child(const std::vector<std::string>& argv, int out_fd, int log_fd) {
  ::dup2(out_fd >= 0 ? out_fd : log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  ::_exit(127);
}

std::string read_tail(int fd, size_t max_bytes) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size <= 0) return "";
  const off_t from = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
  std::string text(static_cast<size_t>(size - from), '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  for (char& c : text) c = (c == '\n' || c == '\t') ? ' ' : c;  // table cells are one line
  return text;
}

}  // namespace

Result<ChildRun> run_child(const std::vector<std::string>& argv, bool capture_stdout, double timeout_seconds) {
  if (argv.empty()) return Status::invalid_argument("run_child: empty command");
  int pipe_fds[2] = {-1, -1};
  if (capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Status::io_error("pipe: " + std::string(std::strerror(errno)));
  }
  // What the child says (stderr, and stdout when not captured) goes to an unlinked temp file, so
  // that a failing child's last words can be put in the row instead of just its exit code.
  char log_path[] = "/tmp/ckptcheck-bench-child-XXXXXX";
  const int log_fd = ::mkstemp(log_path);
  if (log_fd < 0) return Status::io_error("mkstemp: " + std::string(std::strerror(errno)));
  ::unlink(log_path);
  const double start = now_seconds();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::io_error("fork: " + std::string(std::strerror(errno)));
  if (pid == 0) exec_child(argv, pipe_fds[1], log_fd);

  ChildRun run;
  if (capture_stdout) {
    ::close(pipe_fds[1]);
    char buf[1 << 16];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) run.out.append(buf, static_cast<size_t>(n));
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  struct rusage usage {};
  for (;;) {
    const pid_t r = ::wait4(pid, &status, WNOHANG, &usage);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return Status::io_error("wait4: " + std::string(std::strerror(errno)));
    if (seconds_since(start) > timeout_seconds) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  run.wall_seconds = seconds_since(start);
  run.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.log_tail = read_tail(log_fd, 300);
  ::close(log_fd);
  if (run.exit_code == 127) return Status::not_found(command_line(argv) + ": cannot execute " + argv[0]);
  return run;
}

Result<ChildTiming> time_child(int repetitions, const std::vector<std::string>& argv) {
  ChildTiming result;
  for (int i = 0; i < repetitions; ++i) {
    CKPT_ASSIGN_OR_RETURN(ChildRun run, run_child(argv));
    if (run.exit_code != 0) {
      return Status::io_error(command_line(argv) + ": exit code " + std::to_string(run.exit_code) +
                              ", expected 0: " + run.log_tail);
    }
    result.timing.all_seconds.push_back(run.wall_seconds);
    result.max_rss_bytes = std::max(result.max_rss_bytes, run.max_rss_bytes);
  }
  const auto& all = result.timing.all_seconds;
  result.timing.best_seconds = *std::min_element(all.begin(), all.end());
  return result;
}

bool has_subcommand(const std::string& bin, const std::string& subcommand) {
  auto run = run_child({bin, subcommand, "--help"}, false, 30);
  return run.is_ok() && run->exit_code == 0;
}

}  // namespace ckpt::bench
