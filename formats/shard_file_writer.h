// The one writer signature every shard format implements (native, safetensors, HDF5), so the
// sharding layer picks a format by value and never by #ifdef.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/streaming_file_writer.h"
#include "formats/tensor_file.h"

namespace ckpt {

// Reads the bytes of the tensors a checkpoint is written from, where they are not held in memory
// (`convert` copies a source that way: each writer holds one buffer, never the whole state).
class PayloadReader {
 public:
  virtual ~PayloadReader() = default;
  // `length` bytes of tensor `tensor`'s row-major bytes, from `byte_begin`, into `out`.
  virtual Status read(size_t tensor, uint64_t byte_begin, uint8_t* out, size_t length) const = 0;
};

// One chunk to write. `info.data_offset` and `info.sha256` are outputs (ignored on input).
// Its `info.data_bytes` bytes, row-major little-endian, are at `data`, or, where `data` is null,
// are read from `reader`: tensor `reader_tensor`'s bytes from `reader_byte_begin`.
struct ChunkPayload {
  ChunkInfo info;
  const uint8_t* data = nullptr;
  const PayloadReader* reader = nullptr;
  size_t reader_tensor = 0;
  uint64_t reader_byte_begin = 0;
};

// Appends `chunk`'s `size` bytes to `file`, hashed into `hash`: copied from memory, or read from
// its reader straight into the file's buffers. (The size is the writer's: the native writer counts
// it from the shape, where `info.data_bytes` may be unset.)
Status append_payload(StreamingFileWriter& file, const ChunkPayload& chunk, uint64_t size, Sha256* hash);

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
// offsets + shape inside the global shape, a payload in memory or a reader. Names the chunk's label on
// failure.
Status check_chunk_payloads(const std::vector<ChunkPayload>& chunks);

// Checks a chunk's geometry as read back from a file: ranks agree, offsets + shape fit the global
// shape, data_bytes == numel * element size. `where` names the file in messages.
Status check_chunk_geometry(const ChunkInfo& chunk, const std::string& where);

}  // namespace ckpt
