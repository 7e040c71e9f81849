// An all-gather that names the step of the protocol each task is at. Every task of a distributed
// command runs the same steps in the same order; a task that left the path (it failed early, or
// sees other files) reaches a later gather while the others wait in an earlier one, and the two
// collectives would otherwise pair up and exchange the wrong bytes. The step name in every message
// turns that into an error that names both steps; the caller then ends the job (MpiWorld::abort).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"

namespace ckpt {

inline Result<std::vector<std::string>> all_gather_step(ByteCollective& world, const std::string& step,
                                                        const std::string& bytes) {
  std::vector<std::string> all = world.all_gather_bytes(step + '\n' + bytes);
  for (size_t r = 0; r < all.size(); ++r) {
    const size_t end = all[r].find('\n');
    const std::string theirs = end == std::string::npos ? all[r] : all[r].substr(0, end);
    if (theirs != step) {
      return Status::invalid_argument(
          "rank " + std::to_string(r) + " of " + std::to_string(all.size()) + " is at step '" + theirs +
          "' while rank " + std::to_string(world.rank()) + " is at '" + step + "'" +
          (end == std::string::npos ? std::string() : ": " + all[r].substr(end + 1)));
    }
    all[r].erase(0, end + 1);
  }
  return all;
}

}  // namespace ckpt
