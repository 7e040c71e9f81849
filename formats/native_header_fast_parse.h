// A native shard's JSON header read by simdjson (issue 44: a header of 20,000 chunks is ~2.5 MB,
// and 16 of them were parsed into nlohmann trees by every verify, inspect and diff). Only a header
// whose every chunk entry holds exactly the fields ChunkInfo::to_json writes, once each, and passes
// every check of ChunkInfo::from_json takes this path; for anything else it returns nullopt and
// the nlohmann path runs, whose errors are the reference.
#pragma once

#include <functional>
#include <memory>
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

// What one thread reading many native headers keeps from one to the next: the header's bytes and
// simdjson's parser with its index. Made fresh for each of 16 headers of 5 MB, they were fresh
// 4 KiB pages, a fault each (~14 us on the bench VM). Owned by the pass that reads the headers and
// let go with it, so no thread holds the memory after (a long-lived process, the Python package).
class NativeHeaderScratch {
 public:
  NativeHeaderScratch();
  ~NativeHeaderScratch();
  NativeHeaderScratch(const NativeHeaderScratch&) = delete;
  NativeHeaderScratch& operator=(const NativeHeaderScratch&) = delete;

  std::string header;  // the header read (open_native_shard, read_native_shard_entries)
  struct Parser;
  std::unique_ptr<Parser> parser;
};

// The same reading, each chunk entry given to `entry` in header order as fields that point into the
// header or the parser (valid during the call), and the metadata to `metadata`: for a reader that
// keeps less than a ChunkInfo a chunk (shards/shard_header_chunks.h). False where the fast reader
// does not take the header or `entry` returns false; what it was given until then then counts for
// nothing. `scratch`: a parser kept from one header to the next (null: one for this header).
bool walk_native_header_fast(const std::string& header, size_t max_chunks, nlohmann::json* metadata,
                             const std::function<bool(const NativeChunkFields&)>& entry,
                             NativeHeaderScratch* scratch = nullptr);

}  // namespace ckpt
