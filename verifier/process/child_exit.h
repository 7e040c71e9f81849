// How a child process (or a Slurm step) ended, decoded once for every caller.
#pragma once

#include <cstdint>
#include <string>

namespace ckpt {

// How a child ended.
struct ChildExit {
  bool exited = false;  // exited normally with exit_code
  int exit_code = -1;
  bool signaled = false;  // ended by signal `signal`
  int signal = 0;
  bool timed_out = false;     // overran its deadline and was SIGKILLed by us
  int64_t max_rss_bytes = 0;  // the child's own peak resident set (wait4's ru_maxrss)
  bool killed_by(int sig) const { return signaled && signal == sig; }
  std::string describe() const;  // "exit 0", "killed by signal 9 (Killed)", "timed out after deadline"
  bool ok() const { return exited && exit_code == 0; }
  // Decodes a waitpid(2) status.
  static ChildExit from_wait_status(int wait_status);
};

// "SIGKILL", "SIGTERM", ... or "signal".
const char* signal_name(int sig);

}  // namespace ckpt
