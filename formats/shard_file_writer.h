// The one signature every shard format's writer has, so the checkpoint writer and `convert` can
// pick a format at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/status.h"
#include "formats/tensor_file.h"

namespace ckpt {

struct ChunkPayload {
  ChunkInfo info;  // info.data_offset and info.sha256 are outputs
  const uint8_t* data;
};

struct WrittenFile {
  std::string path;
  uint64_t bytes = 0;
  std::string sha256;              // of the whole file
  std::vector<ChunkInfo> chunks;   // with data_offset and sha256 filled
};

// Writes a new file (never overwrites; fsynced before returning). `metadata` is format-level JSON
// (step, shard_index, shard_count, ...) stored in the file.
using ShardFileWriter = Result<WrittenFile> (*)(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                                const nlohmann::json& metadata);

}  // namespace ckpt
