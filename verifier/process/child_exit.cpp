#include "verifier/process/child_exit.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstring>

namespace ckpt {

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

std::string ChildExit::describe() const {
  if (timed_out) return "timed out (killed by the drill)";
  if (exited) return "exit " + std::to_string(exit_code);
  if (signaled) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "unknown end";
}

ChildExit ChildExit::from_wait_status(int wait_status) {
  ChildExit e;
  if (WIFEXITED(wait_status)) {
    e.exited = true;
    e.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    e.signaled = true;
    e.signal = WTERMSIG(wait_status);
  }
  return e;
}

}  // namespace ckpt
