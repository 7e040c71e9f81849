#include "verifier/process/training_binary.h"

#include <unistd.h>

#include "verifier/process/child_process.h"

namespace ckpt {

std::string training_binary_path() {
  auto self = current_executable();
  const std::string dir = self.is_ok() ? self->substr(0, self->find_last_of('/')) : ".";
  // Beside ckptcheck (a build tree, or <prefix>/bin), then <prefix>/libexec for packagers who keep
  // helper programs off PATH.
  const std::string candidates[] = {dir + "/" + kTrainingBinaryName,
                                    dir + "/../libexec/ckptcheck/" + kTrainingBinaryName,
                                    dir + "/../libexec/" + kTrainingBinaryName};
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return candidates[0];
}

}  // namespace ckpt
