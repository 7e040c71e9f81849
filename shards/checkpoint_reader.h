// Reads a committed checkpoint back into whole tensors, checking on the way that every chunk's
// bytes hash to what the manifest says. Torch-free: the torch side converts LoadedTensor.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "formats/status.h"
#include "formats/tensor_file.h"
#include "shards/manifest.h"
#include "shards/tensor_view.h"

namespace ckpt {

// Resolves a manifest shard path inside `checkpoint_dir`, refusing anything whose real path
// (after symlinks) leaves the directory or is not a regular file.
Result<std::string> resolve_shard_path(const std::string& checkpoint_dir, const std::string& relative);

// Opens shard `index` of a manifest with the reader of its recorded format.
Result<std::unique_ptr<TensorFile>> open_manifest_shard(const std::string& checkpoint_dir, const Manifest& manifest,
                                                        size_t index);

// The chunk of a shard file's own header that a manifest chunk of tensor `name` refers to (same
// offsets and shape), or null; its index in file.chunks() goes to `index_out`.
const ChunkInfo* find_file_chunk(const TensorFile& file, const std::string& name, const ManifestChunk& chunk,
                                 size_t* index_out);

// Copies a chunk (offsets/shape inside a row-major global tensor) into the global buffer.
// Precondition: the chunk lies inside the global shape and `chunk_bytes` holds shape's elements.
void scatter_chunk(const std::vector<int64_t>& global_shape, size_t element_size, const std::vector<int64_t>& offsets,
                   const std::vector<int64_t>& shape, const uint8_t* chunk_bytes, uint8_t* global);

struct LoadOptions {
  // Only tensors for which this returns true are read (all when empty).
  std::function<bool(const ManifestTensor&)> select;
};

// Loads and reassembles tensors. Errors name the shard, chunk and tensor.
Result<std::vector<LoadedTensor>> load_checkpoint_tensors(const std::string& checkpoint_dir, const Manifest& manifest,
                                                          const LoadOptions& options = {});

}  // namespace ckpt
