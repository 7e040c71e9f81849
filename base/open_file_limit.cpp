#include "base/open_file_limit.h"

#include <sys/resource.h>

namespace ckpt {

namespace {

// The soft limit found by raise_open_file_limit, where it raised it. Written once, before threads.
bool raised = false;
struct rlimit found {};

}  // namespace

uint64_t raise_open_file_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur != limit.rlim_max) {
    struct rlimit higher = limit;
    higher.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &higher) == 0) {
      found = limit;
      raised = true;
      limit = higher;
    }
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

void restore_open_file_limit() {
  if (raised) (void)::setrlimit(RLIMIT_NOFILE, &found);
}

}  // namespace ckpt
