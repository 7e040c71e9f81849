// The one writer signature every shard format implements (native, safetensors, HDF5), so the
// sharding layer picks a format by value and never by #ifdef.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"

namespace ckpt {

// One chunk to write. `info.data_offset` and `info.sha256` are outputs (ignored on input);
// `data` points at `info.data_bytes` bytes, row-major little-endian.
struct ChunkPayload {
  ChunkInfo info;
  const uint8_t* data = nullptr;
};

struct WrittenFile {
  std::string path;
  uint64_t bytes = 0;
  std::string sha256;  // hex SHA-256 of what `sha256_of` names
  // "file": the whole file's bytes. "header": the native format's preamble + header, which hold
  // every payload's SHA-256 (a two-level hash tree: see formats/README.md), so a verifier hashes
  // each payload byte once instead of twice.
  std::string sha256_of = "file";
  std::vector<ChunkInfo> chunks;  // with data_offset and sha256 of each payload filled in
};

// Writes a new file (never overwrites: O_EXCL; fsynced before returning).
// `metadata` is format-level JSON (step, shard_index, shard_count, ...) stored in the file.
using ShardFileWriter = Result<WrittenFile> (*)(const std::string& path,
                                                const std::vector<ChunkPayload>& chunks,
                                                const nlohmann::json& metadata);

// Checks what every writer needs before it touches the disk: a name, a dtype-consistent byte count,
// offsets + shape inside the global shape, a non-null payload. Names the chunk's label on failure.
Status check_chunk_payloads(const std::vector<ChunkPayload>& chunks);

// Checks a chunk's geometry as read back from a file: ranks agree, offsets + shape fit the global
// shape, data_bytes == numel * element size. `where` names the file in messages.
Status check_chunk_geometry(const ChunkInfo& chunk, const std::string& where);

}  // namespace ckpt
