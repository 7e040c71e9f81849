// Many byte ranges hashed on a few threads, two ranges per thread at a time (run_two_streams_at_a_time),
// so that each core hashes ~1.5x faster than one stream allows: how `verify` checks a sealed
// checkpoint's files and pieces.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "base/status.h"

namespace ckpt {

// Bytes [offset, offset + length) of `source`, and where their SHA-256 (hex) or read error goes.
struct RangeToHash {
  const ByteSource* source;
  uint64_t offset;
  uint64_t length;
  Result<std::string>* digest;
  bool alone = false;  // hashed with no second range beside it (hashes_alone)
};

// Hashes the ranges `next` hands out (nullopt: none left) on the calling thread, two at a time.
// `hashed` (may be null) grows by every block hashed, for progress.
void sha256_ranges_two_at_a_time(const std::function<std::optional<RangeToHash>()>& next,
                                 std::atomic<uint64_t>* hashed = nullptr);

// Every range of `ranges` hashed on `threads` workers (0: one per core), two at a time each, largest
// first, a range that sets the end marked alone (run_hashing_workers): how seal and verify hash
// their units. `report` as in run_parallel_reporting.
void sha256_ranges_on_workers(const std::vector<RangeToHash>& ranges, size_t threads,
                              std::atomic<uint64_t>* hashed = nullptr,
                              const std::function<void()>& report = {});

}  // namespace ckpt
