// Many byte ranges hashed on a few threads, two ranges per thread at a time (run_two_streams_at_a_time),
// so that each core hashes ~1.5x faster than one stream allows: how `verify` checks a sealed
// checkpoint's files and pieces.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

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

}  // namespace ckpt
