#include "distributed/rank_env.h"

#include <cstdlib>

namespace ckpt {

namespace {

Status parse_int(const char* name, const char* text, int min, int max, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    return Status::invalid_argument(std::string(name) + ": expected an integer in [" + std::to_string(min) +
                                    ", " + std::to_string(max) + "], got '" + text + "'");
  }
  *out = static_cast<int>(v);
  return Status::ok();
}

}  // namespace

Result<RankEnv> read_rank_env(const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> const char* { return getenv ? getenv(name) : std::getenv(name); };
  RankEnv env;
  struct Field {
    const char* name;
    int min, max;
    int* out;
  };
  const Field fields[] = {{"WORLD_SIZE", 1, 1 << 20, &env.world_size},
                          {"RANK", 0, 1 << 20, &env.rank},
                          {"LOCAL_RANK", 0, 1 << 20, &env.local_rank},
                          {"MASTER_PORT", 1, 65535, &env.master_port}};
  for (const Field& f : fields) {
    const char* text = get(f.name);
    if (!text || !*text) continue;
    env.from_environment = true;
    CKPT_RETURN_IF_ERROR(parse_int(f.name, text, f.min, f.max, f.out));
  }
  if (const char* addr = get("MASTER_ADDR"); addr && *addr) {
    env.master_addr = addr;
    env.from_environment = true;
  }
  if (env.rank >= env.world_size) {
    return Status::invalid_argument("RANK: " + std::to_string(env.rank) + " is not below WORLD_SIZE " +
                                    std::to_string(env.world_size));
  }
  return env;
}

}  // namespace ckpt
