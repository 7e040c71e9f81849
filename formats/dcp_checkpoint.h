// PyTorch Distributed Checkpoint (DCP) directories, read without torch:
//
//   DIR/.metadata          a pickle of a `Metadata` dataclass (read inertly by formats/pickle_reader.h)
//   DIR/__<rank>_<i>.distcp  a run of storage items, each at the byte range `.metadata` records
//
// `Metadata.state_dict_metadata` maps each fqn to a TensorStorageMetadata (properties: dtype...;
// size: the global shape; chunks: [ChunkStorageMetadata(offsets, sizes)]) or a BytesStorageMetadata.
// `Metadata.storage_data` maps MetadataIndex(fqn, offset) to _StorageInfo(relative_path, offset,
// length). Each item's bytes are one torch.save zip archive: a tensor item holds the chunk as its
// only tensor, a bytes item holds whatever object was saved (an optimizer state dict, ...).
//
// Layouts read (the class names are matched by their last component, so all three are one code path):
//   torch 1.13:   torch.distributed._shard.checkpoint.{metadata,filesystem}
//   torch 2.0-2.3: torch.distributed.checkpoint.{metadata,filesystem}, TensorProperties under
//                 torch.distributed._shard.sharded_tensor.metadata
//   torch 2.4+:   TensorProperties under torch.distributed.checkpoint.metadata; Metadata.storage_meta
//                 and Metadata.version; _StorageInfo.transform_descriptors (an item with a non-empty
//                 one is compressed or transformed: kNotSupported when read)
// DCP's safetensors serialization (torch 2.8's FileSystemWriter(serialization_format=SAFETENSORS)):
//   a data file is its bytes items (torch.save archives, as above) followed by one safetensors blob
//   holding every tensor chunk of that file under its fqn; the blob's __metadata__ carries
//   DCP_SHARDING_INFO (JSON: fqn -> {"saved_offsets": [...]}), DCP_VERSION and format "pt". Torch
//   records each tensor item at the blob's start with the chunk's byte count as length; the reader
//   resolves it to the tensor's real range from the blob header. Recognised by content, whatever the
//   file is called. Torch's HuggingFaceStorageWriter(save_sharded=True) writes the same blobs as
//   `shard-NNNNN-model-NNNNN-of-NNNNN.safetensors` with no `.metadata`: such a directory opens too,
//   its tensors' global shapes inferred from saved_offsets + shape (layout "hf-safetensors-sharded").
// Every item must name a file directly inside DIR (no '/', no "..", no symlink leaving DIR).
// Megatron-Core `torch_dist` directories are DCP directories with `metadata.json`, `common.pt` and
// their own top-level class (formats/megatron_dist_checkpoint.h); they open here too.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "base/status.h"
#include "formats/dcp_metadata.h"
#include "formats/dtype.h"
#include "formats/megatron_dist_checkpoint.h"
#include "formats/pickle_globals.h"
#include "formats/tensor_file.h"

namespace ckpt {

// A directory holding a `.metadata` regular file, or a sharded safetensors directory (below).
bool is_dcp_directory(const std::string& dir);

constexpr const char* kDcpShardingInfoKey = "DCP_SHARDING_INFO";
constexpr const char* kDcpVersionKey = "DCP_VERSION";
constexpr const char* kDcpSavedOffsetsKey = "saved_offsets";
constexpr size_t kDcpMaxShardedFiles = 100'000;

// No `.metadata`, no model.safetensors.index.json, and `*.safetensors` files whose first (by name)
// carries DCP_SHARDING_INFO in its __metadata__ (HuggingFaceStorageWriter(save_sharded=True)).
bool is_dcp_sharded_safetensors_directory(const std::string& dir);

// Prefix of the names common.pt's tensors carry in tensor_files() ("common.pt:optimizer.x").
constexpr const char* kMegatronCommonTensorPrefix = "common.pt:";

// An item's byte range, as a ByteSource of its own (offsets relative to the item's start).
class SliceByteSource final : public ByteSource {
 public:
  SliceByteSource(std::shared_ptr<const ByteSource> parent, uint64_t offset, uint64_t length,
                  std::string name)
      : parent_(std::move(parent)), offset_(offset), length_(length), name_(std::move(name)) {}
  uint64_t size() const override { return length_; }
  Status read_at(uint64_t offset, void* out, size_t length) const override;
  const std::string& name() const override { return name_; }
  Status scan(uint64_t offset, uint64_t length, size_t block_bytes, const BlockVisitor& visit) const override;

 private:
  std::shared_ptr<const ByteSource> parent_;
  uint64_t offset_, length_;
  std::string name_;
};

// Up to this many data files are held open; a directory of more (one file per item, as torch 1.13
// and single_file_per_rank=False write) opens each file for each read (base/path_byte_source.h), so
// no `ulimit -n` limits the files a checkpoint may have.
constexpr size_t kDcpMaxFilesKeptOpen = 64;

class DcpCheckpoint {
 public:
  // Reads `.metadata` and opens every data file it names. A file name that leaves DIR is
  // kInvalidArgument; a missing file kNotFound. Items are not read (open_item does that).
  static Result<DcpCheckpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const DcpMetadata& metadata() const { return metadata_; }
  const std::vector<std::string>& files() const { return files_; }  // relative paths, sorted
  const ByteSource& file_source(size_t file) const { return *sources_[file]; }
  // "" when item `i` lies inside its file, else one line naming the file, item, range and size.
  std::string item_bounds_problem(size_t i) const;
  // Opens item `i`'s bytes as a torch.save archive (kTruncated when it leaves its file).
  Result<std::unique_ptr<TensorFile>> open_item(size_t i) const;
  // Opens item `i` and checks it against `.metadata`: a tensor item holds exactly one tensor of the
  // recorded dtype and chunk shape. Returns the file and the index of that tensor in its chunks().
  Result<std::pair<std::unique_ptr<TensorFile>, size_t>> open_tensor_item(size_t tensor, size_t chunk) const;

  // The safetensors header [begin, end) of data file `f` (its 8-byte length and JSON); false when
  // `f` holds no safetensors blob or the blob did not parse.
  bool safetensors_header_range(size_t f, uint64_t* begin, uint64_t* end) const;
  // "" unless tensor item `i` lies in a safetensors blob whose header disagrees with `.metadata`
  // (then its offset/length stay as recorded and open_item fails with this line).
  const std::string& item_problem(size_t i) const { return item_problems_[i]; }

  // Megatron-Core torch_dist parts (metadata.json, common.pt); `present` false for plain DCP.
  const MegatronParts& megatron() const { return megatron_; }

  // One TensorFile per data file, whose chunks are the tensor chunks (data_offset absolute in the
  // data file) and the tensors inside bytes items (named "<fqn>.<name>"), followed by a first
  // TensorFile for `.metadata` itself (no chunks; its pickle globals). Opens and checks every item.
  // A Megatron directory adds common.pt last: its tensors named kMegatronCommonTensorPrefix +
  // name, its metadata empty (summary() carries it); an unreadable common.pt fails here.
  Result<std::vector<std::unique_ptr<TensorFile>>> tensor_files() const;
  // What `inspect` shows as the source's metadata: layout, version, bytes items, planner_data, and
  // for Megatron "megatron": {metadata_json, metadata_class, mcore_data, common, problems}.
  nlohmann::json summary() const;

 private:
  std::string dir_;
  DcpMetadata metadata_;
  std::vector<std::string> files_;
  std::vector<std::shared_ptr<const ByteSource>> sources_;
  MegatronParts megatron_;

  // DCP's safetensors serialization: per data file, the blob holding its tensor items.
  struct SafetensorsBlob {
    bool present = false;
    uint64_t base = 0, header_end = 0;
    std::shared_ptr<const TensorFile> file;  // null when `status` is an error
    Status status;
    std::string dcp_version;
  };
  void resolve_safetensors_items();
  // Opens data file `f`'s safetensors blob at `base` into blobs_[f]; its DCP_SHARDING_INFO (null
  // when absent), or nullopt when the file holds no blob or it did not open (blobs_[f].status).
  std::optional<nlohmann::json> open_safetensors_blob(size_t f, uint64_t base, const std::string& name);
  std::vector<SafetensorsBlob> blobs_;
  std::vector<std::string> item_problems_;  // per item: "" or how it disagrees with its blob
};

}  // namespace ckpt
