// The one way this project starts a process: the drill's training runs and verify children, the
// launcher's ranks, the bench's timed commands. Its stdout can be piped back (to see
// "ckptcheck-event:" lines as they happen and to capture `verify --json`) or go to a log file or
// stay inherited; its stderr likewise. Every child dies with its parent (PR_SET_PDEATHSIG), so none
// outlives a killed drill or launcher. Every wait has a deadline: a child that overruns it is
// SIGKILLed and reported as timed out, so the caller can never hang on one.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/process/child_exit.h"
#include "verifier/process/running_program.h"

namespace ckpt {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is a path, not searched in PATH unless search_path
  bool search_path = false;
  std::vector<std::string> env;        // "NAME=value" set in the child on top of this environment
  std::vector<std::string> unset_env;  // names removed from the child's environment
  std::string stdout_log;              // appended to; "" = inherited (unless piped)
  std::string stderr_log;              // appended to; "" = inherited
  bool pipe_stdout = false;            // read back by wait_for_event / wait; also copied to stdout_log
};

// The path of the running binary (/proc/self/exe, resolved).
Result<std::string> current_executable();

class ChildProcess : public RunningProgram {
 public:
  static Result<ChildProcess> spawn(const SpawnOptions& options);
  // The drill's children: logs for both streams, and CKPTCHECK_NO_PROGRESS=1 (their progress
  // would interleave with the drill's own).
  static Result<ChildProcess> spawn(const std::vector<std::string>& argv, const std::string& stdout_log,
                                    const std::string& stderr_log, bool pipe_stdout);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() override;  // SIGKILLs and reaps a child still running

  // Reads piped stdout until a line "ckptcheck-event: <kind> <detail>" and returns the detail.
  // Other lines (and other events) are kept in captured_stdout(). kNotFound if the child closes
  // stdout (exits) first, kIoError on timeout (the child is left running: kill it).
  Result<std::string> wait_for_event(const std::string& kind, double timeout_seconds);
  // SIGKILL now, then reap.
  ChildExit kill_and_reap() override;
  // Drains stdout and reaps; past the deadline SIGKILLs and returns timed_out. `tick`, if set, is
  // called about every 200 ms while the child runs (the drill shows the child's last step with it).
  ChildExit wait(double timeout_seconds, const std::function<void()>& tick = nullptr) override;
  // Reaps the child if it has ended, without blocking (stdout is not drained: for unpiped children).
  bool try_reap(ChildExit* exit) override;
  // Whether the child has ended, leaving it unreaped: its exit is still wait()'s or try_reap()'s to
  // report. running() says only that it was not reaped yet, which an ended child also is.
  bool has_ended() const;
  // Sends `sig` to a child still running (signal forwarding).
  void send_signal(int sig);

  pid_t pid() const { return pid_; }
  const std::string& captured_stdout() const { return captured_; }
  const std::string& stderr_log() const { return stderr_log_; }
  bool running() const override { return pid_ > 0; }
  pid_t local_pid() const override { return pid_; }
  std::string label() const override { return "pid " + std::to_string(pid_); }

 private:
  ChildProcess() = default;
  // Reads what is available within `timeout_ms`; false at EOF.
  bool pump_stdout(int timeout_ms);
  ChildExit reap(int wait_status, const struct rusage& usage);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stdout_log_fd_ = -1;
  std::string captured_;
  size_t scanned_ = 0;  // captured_ before this offset has been searched for events
  std::string stderr_log_;
};

// The last `max_bytes` of a log file, for error messages ("" if unreadable).
std::string log_tail(const std::string& path, size_t max_bytes = 600);

}  // namespace ckpt
