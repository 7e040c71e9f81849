// Which task of a group scans which hash unit: the one split every task computes alike from the
// same unit sizes, so no task has to be told its share (verify --distributed: each task plans the
// same units from the same manifest, scans its own share, and the results are gathered).
//
// Greedy by size (LPT): units largest first, each to the task with the least bytes so far (ties to
// the lowest rank). The largest share then exceeds the mean by at most the largest unit, so the
// split balances once a task's share holds many units (scan_unit_bytes cuts them that small).
#pragma once

#include <cstdint>
#include <vector>

namespace ckpt {

// The task (0 .. tasks-1) of each unit. Pure and deterministic: same sizes, same split on every task.
std::vector<int> split_by_size(const std::vector<uint64_t>& sizes, int tasks);

// Bytes per task under `owners` (tasks entries).
std::vector<uint64_t> share_bytes(const std::vector<uint64_t>& sizes, const std::vector<int>& owners,
                                  int tasks);

// The largest share over the mean share (1.0: perfect; 0 units or 0 bytes: 1.0).
double share_balance(const std::vector<uint64_t>& shares);

}  // namespace ckpt
