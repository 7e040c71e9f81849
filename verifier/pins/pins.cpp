#include "verifier/pins/pins.h"

#include <gnu/libc-version.h>
#include <openssl/crypto.h>
#include <zstd.h>

#ifdef CKPTCHECK_WITH_HDF5
#include <hdf5.h>

#include "formats/hdf5_loader.h"
#endif

#include <filesystem>
#include <sstream>

#include "base/file_io.h"
#include "base/sha256.h"
#include "base/sha256_blocks.h"
#include "verifier/pins/container_fingerprint.h"

namespace ckpt {
namespace {

std::string hdf5_version() {
#ifdef CKPTCHECK_WITH_HDF5
  if (!hdf5::load_library().is_ok()) return "not loadable (" + hdf5::library_name() + ")";
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
#else
  return "not built (CKPTCHECK_WITH_HDF5=OFF)";
#endif
}

std::string yaml_cpp_version() {
  // yaml-cpp 0.7 has no version header; CMake knows the version from the package's config file.
#ifdef CKPTCHECK_YAML_CPP_VERSION
  return CKPTCHECK_YAML_CPP_VERSION;
#else
  return "unknown (CKPTCHECK_YAML_CPP_VERSION not defined at build time)";
#endif
}

// The NVIDIA kernel module says which driver is loaded; no CUDA header is needed to read it.
std::string cuda_driver_version() {
  auto text = read_small_file("/proc/driver/nvidia/version", 1 << 16);
  if (!text.is_ok()) return "no driver loaded";
  std::istringstream lines(*text);
  std::string first;
  std::getline(lines, first);
  return first;
}

// The CUDA runtime is whichever libcudart this process mapped; its soname carries the version.
std::string cuda_runtime_version() {
  auto maps = read_small_file("/proc/self/maps", 64ull << 20);
  if (!maps.is_ok()) return "unknown";
  for (const std::string& path : numerics_library_paths(*maps)) {
    const std::string name = std::filesystem::path(path).filename().string();
    if (name.rfind("libcudart", 0) == 0) return name;
  }
  return "not loaded";
}

void collect_fields(const nlohmann::json& value, const std::string& prefix,
                    std::map<std::string, nlohmann::json>* out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, child] : value.items()) {
      collect_fields(child, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  (*out)[prefix] = value;
}

}  // namespace

std::string canonical_json(const nlohmann::json& value) {
  return value.dump();
}

Result<std::string> model_revision(const PinInputs& inputs) {
  nlohmann::json revision = {{"model", inputs.model}, {"initial_weights_sha256", "none"}};
  if (!inputs.initial_weights.empty()) {
    CKPT_ASSIGN_OR_RETURN(revision["initial_weights_sha256"], sha256_hex_of_file(inputs.initial_weights));
  }
  return sha256_hex(canonical_json(revision));
}

Result<std::string> dataset_revision(const PinInputs& inputs) {
  // Files are named by their base name: the same bytes under another checkout's absolute path are
  // the same dataset, and must not read as drift.
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& path : inputs.data_files) {
    CKPT_ASSIGN_OR_RETURN(std::string sha, sha256_hex_of_file(path));
    files.push_back({{"file", std::filesystem::path(path).filename().string()}, {"sha256", sha}});
  }
  const nlohmann::json revision = {{"files", files}, {"preprocessing", inputs.preprocessing}};
  return sha256_hex(canonical_json(revision));
}

std::string config_sha256(const PinInputs& inputs) {
  return sha256_hex(canonical_json(inputs.resolved_config));
}

nlohmann::json dependency_versions(const TorchFacts& torch) {
  return {
      {"libtorch", torch.libtorch_version},
      {"hdf5", hdf5_version()},
      {"zstd", ZSTD_versionString()},
      {"openssl", OpenSSL_version(OPENSSL_VERSION)},
      {"yaml-cpp", yaml_cpp_version()},
      {"compiler", __VERSION__},
      {"libc", std::string("glibc ") + gnu_get_libc_version()},
      {"cuda_runtime", torch.built_with_cuda ? cuda_runtime_version() : "none"},
      {"cuda_driver", torch.built_with_cuda ? cuda_driver_version() : "none"},
      // The code behind every digest the checkpoint's manifest records (base/sha256_blocks.h).
      {"sha256_kernel", sha256_kernel_name(active_sha256_kernel())},
  };
}

Result<nlohmann::json> compute_pins(const PinInputs& inputs, const TorchFacts& torch) {
  CKPT_ASSIGN_OR_RETURN(std::string model, model_revision(inputs));
  CKPT_ASSIGN_OR_RETURN(std::string dataset, dataset_revision(inputs));
  return nlohmann::json{
      {"model_revision", model},
      {"dataset_revision", dataset},
      {"config_sha256", config_sha256(inputs)},
      {"seeds", inputs.seeds},
      {"dependencies", dependency_versions(torch)},
      {"container_fingerprint", container_fingerprint(inputs.threads)},
  };
}

std::map<std::string, nlohmann::json> pin_fields(const nlohmann::json& pins) {
  std::map<std::string, nlohmann::json> fields;
  collect_fields(pins, "", &fields);
  return fields;
}

std::string pins_table(const nlohmann::json& pins) {
  const auto fields = pin_fields(pins);
  size_t width = 0;
  for (const auto& [name, value] : fields) width = std::max(width, name.size());
  std::string table;
  for (const auto& [name, value] : fields) {
    table += name + std::string(width - name.size() + 2, ' ') +
             (value.is_string() ? value.get<std::string>() : value.dump()) + "\n";
  }
  return table;
}

}  // namespace ckpt
