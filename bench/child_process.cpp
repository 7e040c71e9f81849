// Child processes for timing the CLI and the baseline tools, through the project's one spawner
// (verifier/process/child_process.h); its wait4 gives the child's own ru_maxrss for the memory row.
#include "verifier/process/child_process.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {

std::string command_line(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

}  // namespace

Result<ChildRun> run_child(const std::vector<std::string>& argv, bool capture_stdout,
                           double timeout_seconds) {
  if (argv.empty()) return Status::invalid_argument("run_child: empty command");
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
  const double start = now_seconds();
  auto child = ChildProcess::spawn(spawn);
  if (!child.is_ok()) {
    ::unlink(log_path);
    return child.status();
  }
  const ChildExit exit = child->wait(timeout_seconds);
  ChildRun run;
  run.wall_seconds = seconds_since(start);
  run.out = child->captured_stdout();
  run.max_rss_bytes = exit.max_rss_bytes;
  run.exit_code = exit.exited ? exit.exit_code : 128 + exit.signal;
  run.log_tail = log_tail(log_path, 300);
  ::unlink(log_path);
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
