#include "verifier/training_binary.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "verifier/commands.h"

namespace ckpt {

std::string training_binary_path() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = ".";
  if (n > 0) {
    self[n] = '\0';
    const std::string path(self);
    dir = path.substr(0, path.find_last_of('/'));
  }
  return dir + "/" + kTrainingBinaryName;
}

int exec_training_binary(int argc, char** argv) {
  const std::string path = training_binary_path();
  std::vector<char*> args;
  args.push_back(const_cast<char*>(path.c_str()));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(path.c_str(), args.data());
  std::fprintf(stderr, "ckptcheck: cannot run %s: %s (it is built beside ckptcheck: make build)\n", path.c_str(),
               std::strerror(errno));
  return kExitUsage;
}

}  // namespace ckpt
