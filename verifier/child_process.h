// A child process of the drill: the same ckptcheck binary, run with other arguments. Its stdout
// can be piped back (to see "ckptcheck-event:" lines as they happen and to capture `verify
// --json`), its stderr goes to a log file. Every wait has a deadline: a child that overruns it is
// SIGKILLed and reported as timed out, so the drill itself can never hang on one.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "formats/status.h"

namespace ckpt {

// How a child ended.
struct ChildExit {
  bool exited = false;  // exited normally with exit_code
  int exit_code = -1;
  bool signaled = false;  // ended by signal `signal`
  int signal = 0;
  bool timed_out = false;  // overran its deadline and was SIGKILLed by us
  bool killed_by(int sig) const { return signaled && signal == sig; }
  std::string describe() const;  // "exit 0", "killed by signal 9 (Killed)", "timed out after deadline"
  // Decodes a waitpid(2) status.
  static ChildExit from_wait_status(int wait_status);
};

// The path of the running binary (/proc/self/exe, resolved).
Result<std::string> current_executable();

class ChildProcess {
 public:
  // Starts argv[0] with argv. stdout is piped back when pipe_stdout, else appended to stdout_log;
  // what is piped is also copied into stdout_log. stderr goes to stderr_log. The child gets
  // CKPTCHECK_NO_PROGRESS=1 and dies with the drill (PR_SET_PDEATHSIG), so none outlives it.
  static Result<ChildProcess> spawn(const std::vector<std::string>& argv, const std::string& stdout_log,
                                    const std::string& stderr_log, bool pipe_stdout);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // SIGKILLs and reaps a child still running

  // Reads piped stdout until a line "ckptcheck-event: <kind> <detail>" and returns the detail.
  // Other lines (and other events) are kept in captured_stdout(). kNotFound if the child closes
  // stdout (exits) first, kIoError on timeout (the child is left running: kill it).
  Result<std::string> wait_for_event(const std::string& kind, double timeout_seconds);
  // SIGKILL now, then reap.
  ChildExit kill_and_reap();
  // Drains stdout and reaps; past the deadline SIGKILLs and returns timed_out.
  ChildExit wait(double timeout_seconds);

  pid_t pid() const { return pid_; }
  const std::string& captured_stdout() const { return captured_; }
  const std::string& stderr_log() const { return stderr_log_; }
  bool running() const { return pid_ > 0; }

 private:
  ChildProcess() = default;
  // Reads what is available within `timeout_ms`; false at EOF.
  bool pump_stdout(int timeout_ms);
  ChildExit reap(int wait_status);

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
