// What every tensor-file target does after a successful open: the invariants the readers promise
// their callers, checked so that a violation aborts (and libFuzzer keeps the input) instead of
// passing silently because MemoryByteSource refuses an out-of-range read politely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/byte_source.h"
#include "formats/tensor_file.h"

namespace ckpt::fuzz {

inline std::unique_ptr<ByteSource> memory_source(const uint8_t* data, size_t size) {
  return std::make_unique<MemoryByteSource>(std::vector<uint8_t>(data, data + size), "<fuzz>");
}

[[noreturn]] inline void invariant_broken(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

// Every chunk lies inside the file; names, pickle globals and metadata dump as JSON (inspect --json does, and
// nlohmann throws on invalid UTF-8); payload reads of the first chunks succeed.
inline void probe_tensor_file(const TensorFile& file, uint64_t file_size) {
  constexpr uint64_t kMaxHashedBytes = 8u << 20;
  uint64_t hashed = 0;
  (void)file.metadata().dump();
  nlohmann::json globals = nlohmann::json::array();  // inspect --json lists them (dcp_fuzz found raw bytes)
  for (const PickleGlobal& g : file.pickle_globals()) globals.push_back(g.name);
  (void)globals.dump();
  for (size_t i = 0; i < file.chunks().size(); ++i) {
    const ChunkInfo& c = file.chunks()[i];
    if (file.payload_source() != nullptr && !range_within(c.data_offset, c.data_bytes, file_size))
      invariant_broken("a chunk's payload lies outside the file");
    (void)c.to_json().dump();
    (void)c.label();
    if (hashed + c.data_bytes > kMaxHashedBytes) continue;
    hashed += c.data_bytes;
    if (!hash_chunk(file, i).is_ok()) invariant_broken("reading a chunk the reader accepted failed");
  }
}

}  // namespace ckpt::fuzz
