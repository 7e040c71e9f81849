// "A set of global tensors", opened from whatever a user points `inspect`, `diff` or `convert` at,
// as the layouts registry (layouts/layout_registry.h) says what the path is, the same as for verify:
//   - a committed checkpoint dir (its manifest lists tensors and the expected hash of every chunk),
//   - a checkpoint root or ".../latest" (resolved to the latest committed checkpoint),
//   - a sharded model's `*.index.json` (every shard file it names),
//   - a PyTorch Distributed Checkpoint (DCP) dir, Megatron's too (formats/dcp_checkpoint.h),
//   - a trainer's folder (HF Trainer, Accelerate, DeepSpeed), a model folder or a sealed folder,
//   - any single tensor file (native, safetensors, HDF5, PyTorch .pt), sniffed by its bytes.
// Chunks of one global tensor may live in different files; reading a tensor assembles them and
// checks each chunk's bytes against every hash recorded for it (manifest and file header).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/sha256.h"
#include "formats/safetensors_file.h"
#include "formats/tensor_file.h"
#include "layouts/layout.h"
#include "layouts/trainer_layout.h"
#include "shards/laid_out_native_shard.h"
#include "shards/manifest.h"
#include "shards/tensor_view.h"

namespace ckpt {

// Where one chunk of a global tensor lives.
struct SourceChunk {
  size_t file = 0;   // index into TensorSource::files()
  size_t index = 0;  // chunk index inside that file
  // What the manifest expects: its own record's digest (TensorSource keeps the manifest, and the
  // record does not move when the source does), not a copy: 112 bytes a chunk at 320k chunks.
  // Null when the source has no manifest.
  const Sha256Digest* manifest_sha256 = nullptr;
};

struct SourceTensor {
  std::string name;
  std::string component;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;  // of the whole global tensor
  std::vector<SourceChunk> chunks;
  std::string alias_of;  // another name of the same tensor object (formats/tensor_file.h ChunkInfo)
};

// Where one chunk lies in its tensor and in its file, and the hash its file's header records for it
// ("" if the format stores none): the fields of its ChunkInfo, or of its manifest record where the
// file was opened from the manifest (shards/laid_out_native_shard.h). Refers into the source.
// A chunk's SHA-256 as its record holds it: a file header's hex text (ChunkInfo::sha256, empty
// where the format stores none), or a manifest record's 32 bytes, where the header is the
// manifest's layout and its chunks are placed from the records.
class RecordedSha256 {
 public:
  explicit RecordedSha256(const std::string& hex) : hex_(&hex) {}
  explicit RecordedSha256(const Sha256Digest& digest) : digest_(&digest) {}
  bool empty() const { return !digest_ && hex_->empty(); }
  bool matches(const Sha256Digest& computed) const {
    return digest_ ? *digest_ == computed : digest_is_hex(computed, *hex_);
  }
  std::string hex() const { return digest_ ? digest_hex(*digest_) : *hex_; }

 private:
  const std::string* hex_ = nullptr;
  const Sha256Digest* digest_ = nullptr;
};

struct ChunkPlace {
  DimsView offsets;
  DimsView shape;
  uint64_t data_offset;
  uint64_t data_bytes;
  RecordedSha256 header_sha256;
};

// The outcome of streaming one chunk: its recomputed hash and the first recorded hash it contradicts.
struct ChunkCheck {
  std::string label;     // "model.w[0:16, 0:8]"
  std::string file;      // the file's path
  std::string stored;    // the hash the file or manifest recorded ("" if none)
  std::string computed;  // SHA-256 of the bytes actually read
  uint64_t offset = 0;   // of the chunk's payload in `file`
  bool ok() const { return stored.empty() || stored == computed; }
  // "<file>: @OFFSET: sha256 mismatch for <label>: expected .. got .." (verifier/tensors/integrity_codes.h)
  std::string mismatch_message() const;
};

// What opening a source found wrong with how its layout places tensors, with verify's code and
// wording, so verify and inspect say the same: a sharded index's tensors that a shard holds where
// weight_map does not place them (sharded_index_findings).
struct SourceFinding {
  std::string code;  // verify_code (verifier/tensors/integrity_codes.h)
  std::string file;  // the shard, relative to the index's folder
  std::string tensor;
  std::string message;
  bool error = false;  // a verify error (inspect: an issue); else a warning
};

// A sharded index's strays as findings: a copy from_pretrained loads over the one weight_map names
// is an error (reading_ambiguous: the loader and weight_map disagree on the tensor's bytes); a copy
// it loads first and overwrites, or a name weight_map does not list, a warning
// (chunk_not_in_manifest: the index is this layout's manifest).
std::vector<SourceFinding> sharded_index_findings(const SafetensorsIndex& index);

// Per file of a source (TensorSource::files()): the SHA-256 of each of its chunks, by chunk index,
// or nullopt where the file was not scanned.
using ScannedChunkDigests = std::vector<std::optional<std::vector<Sha256Digest>>>;

class TensorSource {
 public:
  static Result<TensorSource> open(const std::string& path);
  // A trainer's folder (layouts/trainer_layout.h) as one source; open() takes this path for one.
  static Result<TensorSource> open_trainer_folder(const TrainerLayout& layout);
  // A model folder or a sealed folder (layouts/layout.h) as one source: its tensor files' tensors.
  static Result<TensorSource> open_folder_files(const LayoutMatch& match);

  const std::string& path() const { return path_; }  // the resolved path (checkpoint dir, file, index)
  const char* kind() const { return kind_; }         // "checkpoint" | "safetensors_index" | <file format>
  const Manifest* manifest() const { return manifest_ ? &*manifest_ : nullptr; }
  // The source's own metadata: the manifest's step/config/pins/extra/shards, the index's "metadata",
  // or the single file's metadata.
  const nlohmann::json& metadata() const { return metadata_; }
  // The source's non-tensor state as Python holds it (formats/py_value.h): a pickle's own typed value
  // (a trainer folder's: a dict of each file's), otherwise metadata() read as json.load would.
  PyValuePtr state_value() const { return state_value_ ? state_value_ : py_value_from_json(metadata_); }
  const std::vector<SourceTensor>& tensors() const { return tensors_; }  // sorted by name
  const std::vector<std::unique_ptr<TensorFile>>& files() const { return files_; }
  const SourceTensor* find(const std::string& name) const;
  const std::vector<SourceFinding>& findings() const { return findings_; }
  ChunkPlace place(const SourceChunk& chunk) const;

  // Streams chunk `chunk` of `tensor` through SHA-256 with a bounded buffer, handing each piece to
  // `sink` (may be empty): the digest of what was read. Read errors are returned.
  Result<Sha256Digest> hash_chunk(const SourceTensor& tensor, size_t chunk,
                                  const std::function<void(const uint8_t*, size_t)>& sink) const;
  // Whether `computed` is what every hash recorded for the chunk (manifest, file header) says:
  // the check without building its report.
  bool chunk_matches(const SourceTensor& tensor, size_t chunk, const Sha256Digest& computed) const;
  // The chunk's report record for `computed`: its label, file, the first recorded hash it
  // contradicts (or the one it matches) and its payload's offset.
  ChunkCheck check_chunk(const SourceTensor& tensor, size_t chunk, const Sha256Digest& computed) const;
  // Every chunk's digest, file by file, for the files whose payloads verify's scan reads
  // (shard_scan.h): native, safetensors and HDF5 files whose payloads are plain ranges. Each is read
  // front to back in blocks and its chunks hashed two streams at a time on `jobs` threads (0 = one
  // per core), instead of a pread and a hasher per chunk: at 320k chunks of ~1 KB that per-chunk
  // cost was most of inspect's reading. A file whose scan cannot be planned or fails stays nullopt:
  // hash_chunk reads its chunks then, and names any error as it always did. Payload bytes only: what
  // they are checked against is chunk_matches' business.
  ScannedChunkDigests scan_chunk_digests(size_t jobs = 0) const;
  // hash_chunk, then check_chunk. A hash mismatch is reported in the ChunkCheck.
  Result<ChunkCheck> stream_chunk(const SourceTensor& tensor, size_t chunk,
                                  const std::function<void(const uint8_t*, size_t)>& sink) const;

  // Reads and assembles a whole global tensor. A chunk whose bytes contradict a recorded hash, or
  // chunks that do not cover the tensor, are kCorruption naming the file and chunk.
  Result<LoadedTensor> read_tensor(const SourceTensor& tensor) const;
  // Whether every chunk of the tensor is a box inside it holding the box's bytes, so that any range
  // of the tensor's bytes can be read from the chunks in place.
  bool reads_in_place(const SourceTensor& tensor) const;
  // `length` bytes of the tensor's row-major bytes from `byte_begin`, as read_tensor assembles them
  // (zeros where no chunk lies; a later chunk over an earlier one), read from the chunks that hold
  // them, for a tensor that reads_in_place: one read per chunk that is a run of the tensor (a dim-0
  // split, a whole tensor), one per row of its last dim for a box (a column split). No hash is
  // checked: a range is part of a chunk, and check_tensors is what checks whole chunks (convert
  // checks, then copies ranges).
  Status read_tensor_bytes(const SourceTensor& tensor, uint64_t byte_begin, uint8_t* out,
                           size_t length) const;
  // Every tensor, in tensors() order, read on every core: a state of 20,000 tensors is 20,000
  // independent reads (issue 44). The first failure in that order is the one returned.
  Result<std::vector<LoadedTensor>> read_tensors() const;
  // What read_tensors checks, without keeping a byte: every tensor's chunks cover it, and every
  // chunk's bytes are what each hash recorded for it says, with read_tensors' first failure when one
  // is not. Then every chunk's digest, for every file (hashed chunk by chunk where the scan does not
  // read the file), each known to match its records: what a drill compares two states by instead of
  // holding both (verifier/tensors/snapshot_tensor.h).
  Result<ScannedChunkDigests> check_tensors() const;

 private:
  // scan_chunk_digests, each chunk's payload also copied to into[file][chunk] where that is set.
  ScannedChunkDigests scan_files(size_t jobs, std::vector<std::vector<uint8_t*>> into) const;
  // read_tensor in two steps: the tensor's buffer, once its chunks add up to it, then its chunks
  // read (and checked) into it.
  Result<LoadedTensor> allocate_tensor(const SourceTensor& tensor) const;
  // kCorruption unless the chunks of `tensor` hold as many bytes as the tensor needs.
  Status check_coverage(const SourceTensor& tensor) const;
  Status fill_tensor(const SourceTensor& tensor, LoadedTensor& out) const;
  // `prefix` goes before each chunk's name (a trainer folder's "optimizer.pt/"), `component`, when
  // given, replaces the file's own (the role its layout gives the file).
  // `only` (sorted), when given: the names the layout places in this file; the file's other chunks
  // are not the source's (a sharded index's strays).
  Status add_file_chunks(size_t file_index, const std::string& prefix = "", const std::string& component = "",
                         const std::vector<std::string>* only = nullptr);
  // A DCP folder's tensor files appended (a DCP checkpoint, or FSDP's sharded part of a trainer's
  // folder), each name under `prefix`, each tensor's chunks in global-offset order, the order DCP
  // reassembles them in; each bytes item's contents into metadata_["bytes_contents"].
  Status add_dcp_folder(const std::string& dir, const std::string& prefix, const std::string& component);
  // described_[file] where there is one, else null.
  const std::vector<ManifestChunkRef>* described(size_t file) const;
  size_t chunk_count(size_t file) const;
  Status finish_tensor_list();

  std::string path_;
  const char* kind_ = "";
  std::optional<Manifest> manifest_;
  nlohmann::json metadata_ = nlohmann::json::object();
  PyValuePtr state_value_;  // null: metadata_ is the state
  std::vector<std::unique_ptr<TensorFile>> files_;
  // Per file: the manifest record of each of its chunks (held by the file), where the file was
  // opened from them (its header is their layout, shards/laid_out_native_shard.h), so that reading
  // never builds its chunk table; null where its header was parsed.
  std::vector<const std::vector<ManifestChunkRef>*> described_;
  std::vector<SourceTensor> tensors_;
  std::vector<SourceFinding> findings_;
  // Name -> index in tensors_ while files are added (first-seen order), so that a source of many
  // files (a DCP directory of one file per chunk) finds each name without rebuilding an index per
  // file; dropped by finish_tensor_list.
  std::unordered_map<std::string, size_t> tensor_by_name_;
};

}  // namespace ckpt
