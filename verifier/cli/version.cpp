#include "verifier/cli/version.h"

#include <CLI/Version.hpp>
#include <nlohmann/json.hpp>

#include "base/sha256_blocks.h"
#include "verifier/pins/pins.h"

#ifndef CKPTCHECK_VERSION
#define CKPTCHECK_VERSION "unknown"
#endif

namespace ckpt {

std::string version_text() {
  const nlohmann::json deps = dependency_versions(current_torch_facts());
  const auto dep = [&](const char* key) { return deps.value(key, std::string("unknown")); };
  const std::string nlohmann_json = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                    std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                    std::to_string(NLOHMANN_JSON_VERSION_PATCH);
  const std::pair<std::string, std::string> rows[] = {
      {"libtorch", dep("libtorch") + " (ckptcheck-train)"},
      {"zstd", dep("zstd")},
      {"openssl", dep("openssl")},
      {"hdf5", dep("hdf5")},
      {"nlohmann-json", nlohmann_json},
      {"yaml-cpp", dep("yaml-cpp")},
      {"cli11", CLI11_VERSION},
      {"compiler", dep("compiler")},
      {"sha256", ckpt::active_sha256_kernel_description()},
  };
  std::string text = std::string("ckptcheck ") + CKPTCHECK_VERSION + "\n";
  for (const auto& [name, value] : rows)
    text += "  " + name + std::string(16 - name.size(), ' ') + value + "\n";
  text.pop_back();  // CLI11 adds the final newline
  return text;
}

}  // namespace ckpt
