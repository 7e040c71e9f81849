#include "base/exit_on_termination.h"

#include <signal.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace ckpt {

namespace {

volatile std::sig_atomic_t verdict = 0;

extern "C" void exit_with_verdict(int) {
  std::_Exit(verdict);  // async-signal-safe: no flush, no destructor
}

}  // namespace

void exit_with_on_termination(int exit_code) {
  std::fflush(stdout);  // what was printed stays printed, whichever way the task ends
  std::fflush(stderr);
  verdict = exit_code;
  struct sigaction action {};
  action.sa_handler = exit_with_verdict;
  sigemptyset(&action.sa_mask);
  (void)::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace ckpt
