// A fresh temporary directory per test, removed with everything in it when the test ends.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ckpt {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ckptcheck-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `contents` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& contents) const {
    const std::string full = path_ + "/" + name;
    std::ofstream(full, std::ios::binary) << contents;
    return full;
  }

 private:
  std::string path_;
};

}  // namespace ckpt
