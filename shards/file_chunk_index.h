// Finds the chunk of a shard file's own header that a manifest chunk refers to, in O(log n) per
// lookup instead of a scan of every chunk of the file: at 16 shards x 20,001 tensors the scan made
// opening a checkpoint quadratic (320,016 lookups over 20,001 chunks each, issue 44).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/tensor_file.h"
#include "shards/manifest.h"

namespace ckpt {

class FileChunkIndex {
 public:
  // `chunks` (a file's chunk list) must outlive the index and not change while it is used.
  explicit FileChunkIndex(const std::vector<ChunkInfo>& chunks);

  // The first chunk (lowest index: what a scan in order finds) of tensor `name` at `offsets`, or
  // null; its index goes to `index_out`.
  const ChunkInfo* find_at(const std::string& name, DimsView offsets, size_t* index_out) const;
  // The first chunk of tensor `name` with the manifest chunk's offsets and shape, or null.
  const ChunkInfo* find(const std::string& name, const ManifestChunk& chunk, size_t* index_out) const;

 private:
  const std::vector<ChunkInfo>& chunks_;
  std::vector<uint32_t> order_;  // chunk indices sorted by (name, offsets, index)
};

}  // namespace ckpt
