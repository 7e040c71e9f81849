#include "verifier/process/program_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace ckpt {
namespace {

bool executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

Result<std::string> find_program(const std::string& name) {
  if (name.empty()) return Status::not_found("an empty program name");
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) return Status::not_found(name + ": no such file");
    if (!executable_file(name)) return Status::not_found(name + ": not an executable file");
    return name;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return Status::not_found(name + ": no such program in PATH (" + dirs + ")");
}

}  // namespace ckpt
