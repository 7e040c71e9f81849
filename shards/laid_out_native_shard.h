// A native shard opened from the manifest's records of its chunks instead of a parse of its header,
// once the header was shown to be byte for byte what the writer lays out for exactly those chunks
// (formats/native_shard.h, native_header_metadata_if_laid_out). Parsing a header builds a ChunkInfo
// per chunk (~450 bytes, five allocations): at 320,000 chunks that was a third of `inspect`, `diff`
// and the drill's reading, and 140 MB (issue 44). Readers that know about the manifest
// (verifier/tensors/tensor_source.h) take each chunk's fields from its record; chunks() is built
// from the same records only when something asks for it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "base/status.h"
#include "formats/native_shard.h"
#include "formats/tensor_file.h"
#include "shards/manifest.h"

namespace ckpt {

// One manifest chunk, by its records. Moving the Manifest keeps them where they are.
struct ManifestChunkRef {
  const ManifestTensor* tensor = nullptr;
  const ManifestChunk* chunk = nullptr;
};

struct LaidOutShard {
  std::unique_ptr<TensorFile> file;
  // For each chunk as open_laid_out_native_shard was given them, its index in file->chunks()
  // (header order, which is payload order).
  std::vector<size_t> index_of;
  // The record of each of file->chunks(), by index: held by the file, valid while it lives.
  const std::vector<ManifestChunkRef>* records = nullptr;
};

// The ChunkInfo a reader of its shard gives for manifest chunk `chunk` of `tensor`, from the records.
ChunkInfo chunk_info_of(const ManifestTensor& tensor, const ManifestChunk& chunk);

// The native header entry the writer lays out for manifest chunk `chunk` of `tensor`. Its digest is
// spelt into `hex`, which the fields' sha256 points at: they are valid while `hex` holds it.
NativeChunkFields native_chunk_fields(const ManifestTensor& tensor, const ManifestChunk& chunk,
                                      Sha256HexText& hex);

// A native shard's header found to be, byte for byte, the writer's layout of some manifest chunks.
struct NativeHeaderLayout {
  std::vector<size_t> order;  // by header position (payload order): the index of its chunk
  nlohmann::json metadata;    // the header's
};

// The layout of `count` chunks, chunk(k) each, when the header of `source` (a native shard) is what
// the writer lays out for them; nullopt for any other header (formats/native_shard.h,
// native_header_metadata_if_laid_out). What verify's shard check and open_laid_out_native_shard
// both decide by.
std::optional<NativeHeaderLayout> native_header_layout(const ByteSource& source, size_t count,
                                                       const std::function<ManifestChunkRef(size_t)>& chunk);

// The manifest's chunks by the shard they are placed in, each shard's in manifest order.
std::vector<std::vector<ManifestChunkRef>> manifest_chunks_by_shard(const Manifest& manifest);

// `shard` of the checkpoint in `checkpoint_dir`, when it is a native shard whose header is the
// writer's layout of `chunks` (the manifest chunks placed in it, manifest_chunks_by_shard) and the
// chunks of each tensor there differ in offsets or shape: opening its header would then give the
// same chunks, in the same order, with the same metadata, and a lookup of a manifest chunk among
// them would find its own (not an earlier twin). nullopt for any other shard (another format or
// writer, a damaged, missing, unsafe or torn file): the format's reader opens it then, and names
// what is wrong. The manifest's tensor records must outlive the file.
std::optional<LaidOutShard> open_laid_out_native_shard(const std::string& checkpoint_dir,
                                                       const ManifestShard& shard,
                                                       const std::vector<ManifestChunkRef>& chunks);

// The same for a shard whose header a version-2 manifest's reader has just read, checked against
// the manifest's digest of it and taken its chunk records from (shards/shard_header_chunks.h):
// `in_header_order`, those records in header order, and `metadata`, the header's, are what parsing
// it would give, so it is opened without reading the header again. `chunks` as above; nullopt
// where a tensor has twins there or the file cannot be opened.
std::optional<LaidOutShard> open_native_shard_from_records(const std::string& checkpoint_dir,
                                                           const ManifestShard& shard,
                                                           const std::vector<ManifestChunkRef>& chunks,
                                                           std::vector<ManifestChunkRef> in_header_order,
                                                           nlohmann::json metadata);

}  // namespace ckpt
