// safetensors (https://github.com/huggingface/safetensors, format as of v0.4):
//   [8 bytes]  N, little-endian u64: length of the JSON header
//   [N bytes]  UTF-8 JSON object, padded with spaces to a multiple of 8 bytes:
//              {"<key>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//               "__metadata__": {"<string>": "<string>", ...}}
//   [rest]     tensor bytes; offsets are relative to the end of the header, contiguous, no holes.
// Our writer names a tensor by ChunkInfo::label() ("model.w[0:128, 0:64]"), which is the plain
// name when the chunk is the whole tensor, so plain loaders see ordinary names for unsharded
// tensors. Our chunk facts live in __metadata__ as JSON strings (see formats/README.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "formats/shard_file_writer.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kSafetensorsFileMetadataKey = "ckptcheck_metadata";
constexpr const char* kSafetensorsChunkKeyPrefix = "ckptcheck_chunk:";

Result<std::unique_ptr<TensorFile>> open_safetensors(std::unique_ptr<ByteSource> source);
Result<std::unique_ptr<TensorFile>> open_safetensors_file(const std::string& path);

// Writes the file through the streaming writer, each payload hashed once; its digest is the
// header's (WrittenFile::sha256_of "header"), which holds every payload's SHA-256.
Result<WrittenFile> write_safetensors_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                           const nlohmann::json& metadata);

// The shard digest a manifest records for our safetensors shards (sha256_of "header"): SHA-256 of
// the 8-byte length field and the JSON header, padding included.
Result<std::string> safetensors_header_digest(const ByteSource& source);

// Hugging Face's sharded layout: model.safetensors.index.json (or pytorch_model.bin.index.json)
// maps tensor -> shard file name. transformers' from_pretrained loads the shards weight_map names,
// each whole, in file-name order (sorted(set(weight_map.values()))), and keeps the names weight_map
// lists; a name two shards hold ends up as the copy loaded last.
struct SafetensorsIndexShard {
  std::string file;                    // as written in weight_map ("model-00001-of-00002.safetensors")
  std::string path;                    // resolved against the index's directory
  std::vector<std::string> tensors;    // tensors weight_map places in this file, sorted
  std::unique_ptr<TensorFile> opened;  // the shard, opened by its first bytes (safetensors or torch)
};
// A tensor a shard holds that weight_map does not place in it.
struct SafetensorsIndexStray {
  std::string file;  // the shard holding it
  std::string tensor;
  std::string mapped_to;  // the shard weight_map places it in; "" when weight_map does not list it
  // mapped_to sorts before `file`: from_pretrained loads this copy after the one weight_map names,
  // so the model gets this one.
  bool loaded_last = false;
  std::string message;  // "holds tensor 'x' too, ...": what it is and what the loader does with it
};
struct SafetensorsIndex {
  std::vector<SafetensorsIndexShard> shards;  // sorted by file name
  std::vector<SafetensorsIndexStray> strays;  // by shard, then name
  nlohmann::json metadata;                    // the index's "metadata" object, or null
};

// Reads the index, rejects shard names that would leave its directory (absolute, "..", empty
// components), opens every shard and checks each mapped tensor is in it (kNotFound naming the
// index, the tensor, its shard and any other shard that holds it), and lists the strays.
Result<SafetensorsIndex> open_safetensors_index(const std::string& index_path);

}  // namespace ckpt
