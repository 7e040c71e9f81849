// A native shard's JSON header read by simdjson (issue 44: a header of 20,000 chunks is ~2.5 MB,
// and 16 of them were parsed into nlohmann trees by every verify, inspect and diff). Only a header
// whose every chunk entry holds exactly the fields ChunkInfo::to_json writes, once each, and passes
// every check of ChunkInfo::from_json takes this path; for anything else it returns nullopt and
// the nlohmann path runs, whose errors are the reference.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/tensor_file.h"

namespace ckpt {

struct NativeHeaderFields {
  std::vector<ChunkInfo> chunks;
  nlohmann::json metadata;
};

std::optional<NativeHeaderFields> parse_native_header_fast(const std::string& header, size_t max_chunks);

}  // namespace ckpt
