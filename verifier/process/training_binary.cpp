#include "verifier/process/training_binary.h"

#include "verifier/process/child_process.h"

namespace ckpt {

std::string training_binary_path() {
  auto self = current_executable();
  const std::string dir = self.is_ok() ? self->substr(0, self->find_last_of('/')) : ".";
  return dir + "/" + kTrainingBinaryName;
}

}  // namespace ckpt
