// The one exchange of the distributed commands: every task works through its share of the units
// (the same split_by_size on every task) and all-gathers what each of its units found, so every
// task holds every unit's result and builds the report a single process builds. Used by verify
// (shard scan units, sealed file pieces), seal (files) and inspect --stats (tensors).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"

namespace ckpt {

// A Status sent as its code (StatusCode as an int) and message, rebuilt on the task that takes it.
Status status_from_code(int code, std::string message);

// A test-only hook: the task whose rank CKPTCHECK_TEST_KILL_RANK names SIGKILLs itself once it has
// scanned its share, before the gather, so a test can kill one task mid-verify deterministically.
void die_here_if_told(int rank);

// Sends `result(u)` of every unit this task owns, with a digest of the unit sizes (a task that saw
// other files planned other units: an error naming it), and calls `take(u, result)` for every
// unit another task owns. `step` names the gather (all_gather_step).
Status exchange_unit_results(ByteCollective& world, const std::string& step,
                             const std::vector<uint64_t>& sizes, const std::vector<int>& owners,
                             const std::function<nlohmann::json(size_t)>& result,
                             const std::function<Status(size_t, const nlohmann::json&)>& take);

}  // namespace ckpt
