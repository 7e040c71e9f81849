// torchrun's environment contract: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. A
// process without them is a world of one. Torch-free, so the launcher and its tests share it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace ckpt {

struct RankEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool from_environment = false;  // any of the variables was set
};

// Reads the variables through `getenv` (std::getenv by default). Inconsistent values (RANK >=
// WORLD_SIZE, a port outside 1..65535, a non-number) are an error naming the variable.
Result<RankEnv> read_rank_env(const std::function<const char*(const char*)>& getenv = {});

}  // namespace ckpt
