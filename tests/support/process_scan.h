// Finds live processes by what their environment says: every run a drill starts carries its scratch
// dir in CKPTCHECK_CKPT_DIR, so "no process names the work dir" means no rank was left running.
#pragma once

#include <dirent.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ckpt::testing {

// The PIDs (and command lines) of live processes whose environment contains `needle`.
inline std::vector<std::string> processes_whose_environment_contains(const std::string& needle) {
  std::vector<std::string> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return {"cannot open /proc"};
  while (const dirent* e = ::readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env("/proc/" + pid + "/environ", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (text.find(needle) == std::string::npos) continue;
    std::ifstream cmd("/proc/" + pid + "/cmdline", std::ios::binary);
    std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    for (char& c : line)
      if (c == '\0') c = ' ';
    found.push_back(pid + ": " + line);
  }
  ::closedir(proc);
  return found;
}

}  // namespace ckpt::testing
