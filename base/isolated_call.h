// Runs one function of this program in a forked child process under a time and a memory limit and
// returns the bytes it produced, or why it produced none. For parsers of untrusted bytes that sit in
// libraries we cannot harden (libhdf5 1.10 reads out of bounds and loops on crafted metadata): a
// crafted file then kills a child, never the tool.
//
// Why a second process mechanism next to verifier/process/child_process.h ("one child-process
// spawner"): that spawner exec()s a program and lives above formats/, which may not include it;
// this forks the calling process and runs a function in it, with no program to exec. It is meant
// for short, self-contained computations whose whole result is a byte string.
//
// What the child may do: the child is a copy of a possibly multi-threaded parent with one thread, so
// any lock another thread held at fork() stays held in it. malloc is safe (glibc resets its locks
// at fork); a library with a global lock (libhdf5 thread-safe builds) must be guarded by `fork_lock`
// in the parent, so fork() never happens while another thread is inside it. The child never runs
// exit handlers or destructors of statics: it ends with _exit.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "base/status.h"

namespace ckpt {

struct IsolationLimits {
  // The parent SIGKILLs the child past this wall-clock time (it may be blocked, not spinning).
  double wall_seconds = 10;
  // RLIMIT_CPU in the child: SIGXCPU at this many CPU seconds, SIGKILL one second later. 0: none.
  unsigned cpu_seconds = 10;
  // RLIMIT_AS in the child: the parent's address-space size at fork (the child starts as a copy of
  // it, mappings included) plus this much. 0: none. Not applied under AddressSanitizer, which
  // reserves terabytes of shadow memory and would fail every allocation under such a limit; ASan's
  // own allocator then stops absurd allocations instead (it aborts the child).
  uint64_t extra_address_space_bytes = uint64_t{1} << 30;
  // A child that announces or writes more than this is killed; its output is not read.
  uint64_t max_output_bytes = uint64_t{256} << 20;
  // Held across fork() only (see above). Null: none.
  std::mutex* fork_lock = nullptr;
};

struct IsolatedOutcome {
  bool completed = false;  // the function returned and all of its output arrived
  std::string output;      // the function's return value (only when completed)
  // Why not completed, for messages: "killed by SIGSEGV", "exceeded 2 s", "exceeded its CPU limit
  // (10 s)", "ran out of memory (limit 1024 MiB above the parent)", "exited with status 1", ...
  std::string failure;
};

// Runs `fn` in a forked child under `limits`. The child exits 0 after writing fn's result; a crash,
// a limit or an exception in it is an outcome with completed == false, not an error. Errors
// (kIoError) are only the parent's own: no pipe, no fork.
Result<IsolatedOutcome> run_isolated(const std::function<std::string()>& fn,
                                     const IsolationLimits& limits = {});

// True in a build with AddressSanitizer (where RLIMIT_AS is not applied).
bool built_with_address_sanitizer();

}  // namespace ckpt
