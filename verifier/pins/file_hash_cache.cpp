#include "verifier/pins/file_hash_cache.h"

#include <sys/stat.h>

#include <cstdlib>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/sha256.h"

namespace ckpt {

namespace {
constexpr uint64_t kMaxCacheBytes = 1 << 20;

std::string file_key(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) +
         ":" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}
}  // namespace

std::string default_hash_cache_path() {
  if (const char* dir = std::getenv("CKPTCHECK_CACHE_DIR")) return std::string(dir) + "/file-hashes.json";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"))
    return std::string(xdg) + "/ckptcheck/file-hashes.json";
  if (const char* home = std::getenv("HOME")) return std::string(home) + "/.cache/ckptcheck/file-hashes.json";
  return "";
}

Result<std::string> cached_file_sha256(const std::string& path, const std::string& cache_path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::io_error(path + ": cannot stat");
  const std::string key = path + "@" + file_key(st);
  nlohmann::json cache = nlohmann::json::object();
  if (!cache_path.empty()) {
    auto text = read_small_file(cache_path, kMaxCacheBytes);
    if (text.is_ok()) {
      auto parsed = parse_json(*text, cache_path);
      if (parsed.is_ok() && parsed->is_object()) cache = *parsed;
    }
    auto hit = cache.find(key);
    if (hit != cache.end() && hit->is_string() && hit->get<std::string>().size() == 64)
      return hit->get<std::string>();
  }
  CKPT_ASSIGN_OR_RETURN(std::string sha, sha256_hex_of_file(path));
  if (!cache_path.empty()) {
    if (cache.size() > 256) cache = nlohmann::json::object();  // bounded: start over rather than grow
    cache[key] = sha;
    const auto slash = cache_path.find_last_of('/');
    if (slash != std::string::npos && make_directory(cache_path.substr(0, slash)).is_ok()) {
      (void)write_file_atomically(cache_path, cache.dump());  // best effort: a cache, not a record
    }
  }
  return sha;
}

}  // namespace ckpt
