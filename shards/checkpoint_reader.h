// Reads a committed checkpoint back into whole tensors, checking on the way that every chunk's
// bytes hash to what the manifest says. Torch-free: the torch side converts LoadedTensor.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"
#include "shards/manifest.h"
#include "shards/tensor_view.h"

namespace ckpt {

// Resolves a manifest shard path inside `checkpoint_dir`, refusing anything whose real path
// (after symlinks) leaves the directory or is not a regular file.
Result<std::string> resolve_shard_path(const std::string& checkpoint_dir, const std::string& relative);

enum class ShardOpening {
  kParseFile,  // the format's reader parses the file's own header (inspect, diff: they show it)
  // Loads: an HDF5 or native shard whose metadata hashes to the manifest's digest is described by
  // the manifest's chunk table instead of a second parse of that metadata (the two are the same
  // layout; checkpoint_reader.cpp says why). Its metadata() is then empty.
  kForLoad,
  // kForLoad for a native shard whose header the caller has already shown to be byte for byte the
  // manifest's layout of its chunks (verify, formats/native_shard.h): not hashed a second time.
  kForLoadHeaderMatched,
};

// Which tensors a caller reads (all when empty).
using TensorSelect = std::function<bool(const ManifestTensor&)>;

// Opens shard `index` of a manifest with the reader of its recorded format. kForLoad with `select`:
// a native shard described by the manifest lists only the chunks of the selected tensors.
Result<std::unique_ptr<TensorFile>> open_manifest_shard(const std::string& checkpoint_dir,
                                                        const Manifest& manifest, size_t index,
                                                        ShardOpening opening = ShardOpening::kParseFile,
                                                        const TensorSelect& select = {});

// The chunk of a shard file's own header that a manifest chunk of tensor `name` refers to (same
// offsets and shape), or null; its index in file.chunks() goes to `index_out`.
const ChunkInfo* find_file_chunk(const TensorFile& file, const std::string& name, const ManifestChunk& chunk,
                                 size_t* index_out);

// Copies a chunk (offsets/shape inside a row-major global tensor) into the global buffer.
// Precondition: the chunk lies inside the global shape and `chunk_bytes` holds shape's elements.
void scatter_chunk(DimsView global_shape, size_t element_size, DimsView offsets, DimsView shape,
                   const uint8_t* chunk_bytes, uint8_t* global);

struct LoadOptions {
  // Only tensors for which this returns true are read (all when empty).
  TensorSelect select;
  // Check every chunk's bytes against the manifest's SHA-256 (the default). Off only where the
  // caller measures or has checked the same files itself (the bench's "trusted" load row).
  bool verify_hashes = true;
  // Map shard files (zero-copy views). false: read each needed payload with pread instead, for a
  // caller whose memory must not count mapped page-cache folios (verify's resume-scalar check).
  bool map_files = true;
  size_t jobs = 0;  // threads hashing and assembling chunks; 0: one per core
  // By shard index: opened with kForLoadHeaderMatched (verify's resume-scalar check, after its shard
  // checks compared those headers). Empty: every shard as kForLoad.
  std::vector<bool> headers_matched;
};

// Loads and reassembles tensors into buffers they own (a copy of map_checkpoint_tensors' views,
// shards/mapped_checkpoint.h). Errors name the shard, chunk and tensor.
Result<std::vector<LoadedTensor>> load_checkpoint_tensors(const std::string& checkpoint_dir,
                                                          const Manifest& manifest,
                                                          const LoadOptions& options = {});

}  // namespace ckpt
