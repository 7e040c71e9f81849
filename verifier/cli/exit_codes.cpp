#include "verifier/cli/exit_codes.h"

#include <cstdio>

namespace ckpt {

int exit_code_for(const Status& status) {
  if (status.is_ok()) return kExitOk;
  return is_damage(status) ? kExitCheckFailed : kExitUsage;
}

int report_failure(const char* command, const Status& status) {
  std::fprintf(stderr, "ckptcheck %s: %s\n", command, status.to_string().c_str());
  return exit_code_for(status);
}

}  // namespace ckpt
