// Streaming SHA-256. The block function is base/sha256_blocks (SHA-NI on CPUs that have it, else
// OpenSSL's); the state is held here so that two hashers can be stepped together
// (sha256_update_two), which is how verify hashes two units at once on one core.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ckpt {

class ByteSource;
class Sha256Batch;

using Sha256Digest = std::array<uint8_t, 32>;
// A digest spelt as digest_hex spells it, held without a heap string.
using Sha256HexText = std::array<char, 64>;

class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // update, finish and sha256_update_two throw std::logic_error while the hasher has pieces
  // queued in a Sha256Batch that has not run yet (or that was destroyed before running them): the
  // bytes would reach the hasher out of order, or not at all, and give a wrong digest silently.
  void update(const void* data, size_t size);
  Sha256Digest finish();  // the hasher may not be updated afterwards
  std::string finish_hex();
  // Whether a Sha256Batch holds pieces for this hasher that it has not hashed yet.
  bool queued_in_batch() const { return queued_in_ != nullptr; }

  // a.update(a_data, a_size) and b.update(b_data, b_size), with the whole blocks both have in
  // common compressed two streams at a time. `a` and `b` may be the same hasher (then in order).
  friend void sha256_update_two(Sha256& a, const void* a_data, size_t a_size, Sha256& b, const void* b_data,
                                size_t b_size);

 private:
  // An update's bytes once the partial block is topped up: whole blocks, then a tail to keep.
  struct Split {
    const uint8_t* blocks;
    size_t block_count;
    const uint8_t* tail;
    size_t tail_size;
  };
  Split begin_update(const uint8_t* data, size_t size);
  void end_update(const Split& split);
  // Throws std::logic_error when a batch still owes this hasher bytes (see update).
  void check_not_queued(const char* operation) const;

  uint32_t state_[8];
  uint8_t partial_[64];
  size_t partial_size_ = 0;
  uint64_t total_bytes_ = 0;
  // The batch holding this hasher's queued pieces, from its first add until it runs, and the lane
  // they are in. Recording the batch, not just a lane index, is what lets a second batch refuse
  // the hasher instead of mistaking its own lane of another hasher (or none) for this one's.
  friend class Sha256Batch;
  const Sha256Batch* queued_in_ = nullptr;
  uint32_t batch_lane_ = 0;
  // A batch was destroyed before hashing pieces queued for this hasher: its digest can no longer
  // be right, so the hasher refuses to go on.
  bool lost_queued_bytes_ = false;
};

std::string to_hex(const uint8_t* data, size_t size);
// Whether `s` is a SHA-256 as this project writes it: 64 lowercase hex digits.
bool is_sha256_hex(std::string_view s);
std::string digest_hex(const Sha256Digest& digest);
// digest_hex's 64 characters written at `out`, for writers that lay out many digests without a
// string each.
void digest_hex_into(const Sha256Digest& digest, char* out);
// Whether `hex` is digest_hex(digest), without building it: checks of 320,000 chunks against
// their recorded hashes built and freed a string each (issue 44).
bool digest_is_hex(const Sha256Digest& digest, std::string_view hex);
// The digest `hex` spells, when it is one as is_sha256_hex accepts.
std::optional<Sha256Digest> digest_from_hex(std::string_view hex);
Sha256Digest sha256_digest(const void* data, size_t size);
std::string sha256_hex(const void* data, size_t size);
std::string sha256_hex(const std::string& text);

// Hashes bytes [offset, offset+length) of a source with a bounded buffer (streaming). `hashed`, if
// set, grows by every piece hashed, for a progress display on another thread.
Result<std::string> sha256_hex_of_range(const ByteSource& source, uint64_t offset, uint64_t length,
                                        std::atomic<uint64_t>* hashed = nullptr);
// Hashes a whole file by streaming it; also returns its size through `size_out` if non-null.
Result<std::string> sha256_hex_of_file(const std::string& path, uint64_t* size_out = nullptr);

}  // namespace ckpt
