#include "verifier/pins/container_fingerprint.h"

#include <gnu/libc-version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "base/file_io.h"
#include "base/sha256.h"
#include "verifier/pins/file_hash_cache.h"
#include "verifier/process/training_binary.h"

namespace ckpt {
namespace {

// /proc files report size 0, so read_small_file's bound is what stops a runaway read.
constexpr uint64_t kMaxProcFileBytes = 64ull << 20;

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

bool is_numerics_library(const std::string& name) {
  static const char* const kPrefixes[] = {"libtorch", "libc10",    "libopenblas", "libblas",
                                          "libmkl",   "libcublas", "libcudnn",    "libcudart"};
  for (const char* prefix : kPrefixes) {
    if (name.rfind(prefix, 0) == 0 && name.find(".so") != std::string::npos) return true;
  }
  return false;
}

std::string read_or_empty(const std::string& path) {
  auto text = read_small_file(path, kMaxProcFileBytes);
  return text.is_ok() ? *text : std::string();
}

}  // namespace

const std::vector<std::string>& numerics_env_vars() {
  static const std::vector<std::string> kVars = {"OMP_NUM_THREADS",
                                                 "MKL_NUM_THREADS",
                                                 "OPENBLAS_NUM_THREADS",
                                                 "OPENBLAS_CORETYPE",
                                                 "OPENBLAS_VERBOSE",
                                                 "MKL_CBWR",
                                                 "MKL_ENABLE_INSTRUCTIONS",
                                                 "ONEDNN_MAX_CPU_ISA",
                                                 "DNNL_MAX_CPU_ISA",
                                                 "ATEN_CPU_CAPABILITY",
                                                 "CUBLAS_WORKSPACE_CONFIG",
                                                 "CUDA_VISIBLE_DEVICES",
                                                 "CUDA_LAUNCH_BLOCKING",
                                                 "NVIDIA_TF32_OVERRIDE",
                                                 "TORCH_CUDNN_V8_API_ENABLED",
                                                 "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
                                                 "NCCL_ALGO",
                                                 "NCCL_PROTO",
                                                 "NCCL_P2P_DISABLE",
                                                 "NCCL_IB_DISABLE",
                                                 "HIP_VISIBLE_DEVICES",
                                                 "ROCBLAS_LAYER"};
  return kVars;
}

nlohmann::json os_release_fields(const std::string& text) {
  nlohmann::json fields = {{"PRETTY_NAME", "unknown"}, {"VERSION_ID", "unknown"}};
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim(line.substr(0, eq));
    if (fields.contains(key)) fields[key] = unquote(trim(line.substr(eq + 1)));
  }
  return fields;
}

nlohmann::json cpu_identity(const std::string& text) {
  static const std::set<std::string> kIsaFlags = {
      "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
      "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile",
      // aarch64 spellings ("Features" line)
      "asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm"};
  std::string model = "unknown";
  std::vector<std::string> flags;
  bool have_flags = false;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (trim(line).empty() && (model != "unknown" || have_flags)) break;  // end of the first processor
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "model name" && model == "unknown") model = value;
    if ((key == "flags" || key == "Features") && !have_flags) {
      have_flags = true;
      std::istringstream words(value);
      std::string word;
      while (words >> word) {
        if (kIsaFlags.count(word)) flags.push_back(word);
      }
    }
  }
  std::sort(flags.begin(), flags.end());
  flags.erase(std::unique(flags.begin(), flags.end()), flags.end());
  return {{"model", model}, {"isa_flags", flags}};
}

std::vector<std::string> numerics_library_paths(const std::string& maps_text) {
  std::set<std::string> paths;
  std::istringstream lines(maps_text);
  std::string line;
  while (std::getline(lines, line)) {
    // address perms offset dev inode path — the path is the first field that starts with '/'.
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = trim(line.substr(slash));
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) {
      path.resize(path.size() - 10);
    }
    if (is_numerics_library(std::filesystem::path(path).filename().string())) paths.insert(path);
  }
  return {paths.begin(), paths.end()};
}

std::vector<std::string> numerics_library_paths_from_ldd(const std::string& ldd_text) {
  std::set<std::string> paths;
  std::istringstream lines(ldd_text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto arrow = line.find("=> /");
    if (arrow == std::string::npos) continue;
    std::string path = line.substr(arrow + 3);
    path = path.substr(0, path.find(" ("));
    if (is_numerics_library(std::filesystem::path(path).filename().string())) paths.insert(trim(path));
  }
  return {paths.begin(), paths.end()};
}

namespace {
// `ldd` only asks the dynamic loader to resolve dependencies; it runs none of the program's code.
std::string ldd_output(const std::string& program) {
  if (program.empty() || program.find('\'') != std::string::npos) return "";
  std::string out;
  if (FILE* pipe = ::popen(("ldd '" + program + "' 2>/dev/null").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0 && out.size() < kMaxProcFileBytes)
      out.append(buf, n);
    ::pclose(pipe);
  }
  return out;
}
}  // namespace

FingerprintSources default_fingerprint_sources() {
  FingerprintSources sources;
  sources.linked_program = training_binary_path();
  return sources;
}

nlohmann::json fingerprint_of(const nlohmann::json& inputs) {
  // nlohmann::json keeps object keys in a std::map, so dump() is sorted and therefore canonical.
  return {{"inputs", inputs}, {"sha256", sha256_hex(inputs.dump())}};
}

nlohmann::json container_fingerprint(int threads, const FingerprintSources& sources) {
  nlohmann::json libraries = nlohmann::json::object();
  // Canonical paths: the loader may name /lib/... what the maps call /usr/lib/... (merged /usr).
  std::set<std::string> paths;
  auto add = [&paths](const std::string& p) {
    std::error_code ec;
    const auto canonical = std::filesystem::canonical(p, ec);
    paths.insert(ec ? p : canonical.string());
  };
  for (const std::string& p : numerics_library_paths(read_or_empty(sources.maps))) add(p);
  for (const std::string& p : numerics_library_paths_from_ldd(ldd_output(sources.linked_program))) add(p);
  for (const std::string& path : paths) {
    auto sha = cached_file_sha256(path);
    libraries[path] = sha.is_ok() ? *sha : "unreadable: " + sha.status().message();
  }
  nlohmann::json env = nlohmann::json::object();
  for (const std::string& name : numerics_env_vars()) {
    const char* value = std::getenv(name.c_str());
    env[name] = value ? value : "unset";
  }
  nlohmann::json inputs = {
      {"os", os_release_fields(read_or_empty(sources.os_release))},
      {"libc", gnu_get_libc_version()},
      {"libraries", libraries},
      {"cpu", cpu_identity(read_or_empty(sources.cpuinfo))},
      {"threads", threads},
      {"env", env},
  };
  return fingerprint_of(inputs);
}

}  // namespace ckpt
