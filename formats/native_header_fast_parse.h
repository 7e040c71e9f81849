// A native shard's JSON header read by simdjson (issue 44: a header of 20,000 chunks is ~2.5 MB,
// and 16 of them were parsed into nlohmann trees by every verify, inspect and diff). Only a header
// whose every chunk entry holds exactly the fields ChunkInfo::to_json writes, once each, and passes
// every check of ChunkInfo::from_json takes this path; for anything else it returns nullopt and
// the nlohmann path runs, whose errors are the reference.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dims.h"
#include "formats/dtype.h"
#include "formats/tensor_file.h"

namespace ckpt {

// A chunk entry of a native header as fields, without a ChunkInfo (~450 bytes and five heap blocks
// a chunk): held elsewhere (a manifest's records, to compare a header with), or read from a header
// in place (walk_native_header_fast).
struct NativeChunkFields {
  std::string_view name;
  std::string_view component;
  DType dtype = DType::kF32;
  DimsView global_shape;
  DimsView offsets;
  DimsView shape;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
  std::string_view sha256;
};

struct NativeHeaderFields {
  std::vector<ChunkInfo> chunks;
  nlohmann::json metadata;
};

std::optional<NativeHeaderFields> parse_native_header_fast(const std::string& header, size_t max_chunks);

// The same reading, each chunk entry given to `entry` in header order as fields that point into the
// header or the parser (valid during the call), and the metadata to `metadata`: for a reader that
// keeps less than a ChunkInfo a chunk (shards/shard_header_chunks.h). False where the fast reader
// does not take the header or `entry` returns false; what it was given until then then counts for
// nothing. One parser a thread is kept for the next header.
bool walk_native_header_fast(const std::string& header, size_t max_chunks, nlohmann::json* metadata,
                             const std::function<bool(const NativeChunkFields&)>& entry);

}  // namespace ckpt
