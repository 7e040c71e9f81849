// Child processes for timing the CLI and the baseline tools, through the project's one spawner
// (verifier/process/child_process.h); its wait4 gives the child's own ru_maxrss for the memory row.
#include "verifier/process/child_process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {

constexpr const char* kGnuTime = "/usr/bin/time";

double children_cpu_seconds() {
  struct rusage usage {};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

// The first line of `path` that holds "error:", up to 600 bytes of it; "" when none does.
std::string first_error_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  for (int lines = 0; lines < 100000 && std::getline(in, line); ++lines)
    if (line.find("error:") != std::string::npos)
      return line.size() > 600 ? line.substr(0, 600) + "..." : line;
  return "";
}

// What a failed child said: its error line when the tail does not hold it already, then the tail.
std::string last_words(const ChildRun& run) {
  if (run.error_line.empty() || run.log_tail.find(run.error_line) != std::string::npos) return run.log_tail;
  return run.error_line + " [...] " + run.log_tail;
}

}  // namespace

Result<ChildRun> run_child(const std::vector<std::string>& command, bool capture_stdout,
                           double timeout_seconds, bool own_rss) {
  if (command.empty()) return Status::invalid_argument("run_child: empty command");
  std::vector<std::string> argv = command;
  std::string rss_path;
  if (own_rss && ::access(kGnuTime, X_OK) == 0) {
    char path[] = "/tmp/ckptcheck-bench-rss-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return Status::io_error("mkstemp failed");
    ::close(fd);
    rss_path = path;
    argv = {kGnuTime, "-f", "%M", "-o", rss_path};
    argv.insert(argv.end(), command.begin(), command.end());
  }
  // What the child says (stderr, and stdout when not captured) goes to a temp file, so that a
  // failing child's last words can be put in the row instead of just its exit code.
  char log_path[] = "/tmp/ckptcheck-bench-child-XXXXXX";
  const int log_fd = ::mkstemp(log_path);
  if (log_fd < 0) return Status::io_error("mkstemp failed");
  ::close(log_fd);
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.search_path = true;
  spawn.stdout_log = capture_stdout ? "/dev/null" : log_path;
  spawn.stderr_log = log_path;
  spawn.pipe_stdout = capture_stdout;
  // The bench runs one child at a time, so the growth of its reaped children's CPU time is this one's.
  const double cpu_before = children_cpu_seconds();
  const double start = now_seconds();
  auto child = ChildProcess::spawn(spawn);
  if (!child.is_ok()) {
    ::unlink(log_path);
    return child.status();
  }
  const ChildExit exit = child->wait(timeout_seconds);
  ChildRun run;
  run.wall_seconds = seconds_since(start);
  run.cpu_seconds = children_cpu_seconds() - cpu_before;
  run.out = child->captured_stdout();
  run.max_rss_bytes = exit.max_rss_bytes;
  run.exit_code = exit.exited ? exit.exit_code : 128 + exit.signal;
  run.log_tail = log_tail(log_path, 300);
  if (run.exit_code != 0) run.error_line = first_error_line(log_path);
  ::unlink(log_path);
  if (!rss_path.empty()) {
    std::ifstream in(rss_path);
    std::string line, last;  // GNU time may write "Command exited with non-zero status N" first
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    ::unlink(rss_path.c_str());
    char* end = nullptr;
    const long long kib = std::strtoll(last.c_str(), &end, 10);
    if (end != last.c_str() && kib > 0) {
      run.max_rss_bytes = kib * 1024;
      run.rss_includes_bench = false;
    }
  }
  if (run.exit_code == 127)
    return Status::not_found(command_line(command) + ": cannot execute " + command[0]);
  return run;
}

Status run_ok(const std::vector<std::string>& argv) {
  CKPT_ASSIGN_OR_RETURN(ChildRun run, run_child(argv, false, 1800));
  if (run.exit_code != 0) {
    return Status::io_error(command_line(argv) + ": exit code " + std::to_string(run.exit_code) + ": " +
                            last_words(run));
  }
  return Status::ok();
}

Result<ChildTiming> time_child(int repetitions, const std::vector<std::string>& argv,
                               const std::vector<int>& ok_exit_codes, bool own_rss) {
  ChildTiming result;
  for (int i = 0; i < repetitions; ++i) {
    CKPT_ASSIGN_OR_RETURN(ChildRun run, run_child(argv, false, 600, own_rss));
    if (std::find(ok_exit_codes.begin(), ok_exit_codes.end(), run.exit_code) == ok_exit_codes.end()) {
      return Status::io_error(command_line(argv) + ": exit code " + std::to_string(run.exit_code) +
                              ", expected " + std::to_string(ok_exit_codes.front()) + ": " + last_words(run));
    }
    result.exit_code = run.exit_code;
    result.timing.all_seconds.push_back(run.wall_seconds);
    result.cpu_seconds.push_back(run.cpu_seconds);
    result.max_rss_bytes = std::max(result.max_rss_bytes, run.max_rss_bytes);
    result.rss_includes_bench = run.rss_includes_bench;
  }
  const auto& all = result.timing.all_seconds;
  result.timing.best_seconds = *std::min_element(all.begin(), all.end());
  return result;
}

Result<int64_t> own_peak_rss(const std::vector<std::string>& argv, const std::vector<int>& ok_exit_codes) {
  CKPT_ASSIGN_OR_RETURN(ChildTiming t, time_child(1, argv, ok_exit_codes, /*own_rss=*/true));
  return t.max_rss_bytes;
}

bool has_subcommand(const std::string& bin, const std::string& subcommand) {
  auto run = run_child({bin, subcommand, "--help"}, false, 30);
  return run.is_ok() && run->exit_code == 0;
}

}  // namespace ckpt::bench
