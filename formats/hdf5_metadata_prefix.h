// Where an HDF5 shard's metadata prefix ends (formats/README.md, "HDF5"). Torch-free and
// libhdf5-free: the verifier and the loader apply the rule without opening the library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "formats/tensor_file.h"

namespace ckpt {

// The offset of the first non-empty payload, or `file_bytes` when every payload is empty. A shard
// we wrote has all its metadata before it and only payloads and zeros after it, so its manifest
// digest (sha256_of "header") is the SHA-256 of [0, hdf5_metadata_prefix_end).
inline uint64_t hdf5_metadata_prefix_end(const std::vector<ChunkInfo>& chunks, uint64_t file_bytes) {
  uint64_t end = file_bytes;
  for (const ChunkInfo& c : chunks) {
    if (c.data_bytes) end = std::min(end, c.data_offset);
  }
  return end;
}

}  // namespace ckpt
