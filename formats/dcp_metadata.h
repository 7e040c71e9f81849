// What a PyTorch Distributed Checkpoint's `.metadata` says, as plain records (formats/dcp_checkpoint.h
// opens the directory around it). Two readers fill them from the pickle: the typed one
// (formats/dcp_metadata_reader.h), which reads the shapes torch writes in memory proportional to the
// chunks, and the restricted VM of formats/pickle_reader.h for everything else.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/shared_dims.h"
#include "base/shared_text.h"
#include "base/status.h"
#include "formats/dtype.h"
#include "formats/pickle_globals.h"

namespace ckpt {

constexpr const char* kDcpMetadataFileName = ".metadata";
constexpr uint64_t kDcpMaxMetadataBytes = 256ull << 20;
constexpr size_t kDcpMaxItems = 1'000'000;

// One storage item: where a chunk's (or a bytes entry's) torch.save archive lives. A checkpoint
// holds up to a million (kDcpMaxItems), so its names and extents are shared (base/shared_text.h,
// base/shared_dims.h).
struct DcpItem {
  SharedText fqn;
  SharedDims offsets;  // the chunk's offsets; empty for a bytes item
  bool is_bytes = false;
  bool safetensors = false;  // a tensor chunk inside a safetensors blob
  SharedText relative_path;  // the data file, relative to DIR
  size_t file = 0;           // index into DcpCheckpoint::files()
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<std::string> transforms;  // 2.4+ transform_descriptors (empty: plain torch.save bytes)
  // Where the item's container (its torch.save archive, or the safetensors blob holding it) starts.
  // For a tensor inside a safetensors blob, offset/length above are resolved to the tensor's bytes
  // and recorded_offset/recorded_length keep what `.metadata` says.
  uint64_t container_offset = 0;
  uint64_t recorded_offset = 0;
  uint64_t recorded_length = 0;
  std::string label() const;  // "model.w[0:16, 0:32]" or "optimizer (bytes)"
};

struct DcpChunk {
  SharedDims offsets;
  SharedDims sizes;
  size_t item = SIZE_MAX;  // index into DcpMetadata::items; SIZE_MAX when storage_data has none
};

struct DcpTensor {
  std::string fqn;
  DType dtype = DType::kF32;
  std::string torch_dtype;  // "torch.float32", as the pickle names it
  std::vector<int64_t> shape;
  std::vector<DcpChunk> chunks;  // sorted by offsets
};

struct DcpBytesEntry {
  std::string fqn;
  size_t item = SIZE_MAX;  // SIZE_MAX when storage_data has none
};

struct DcpMetadata {
  std::string layout;              // "torch-1.13" | "torch-2.0" | "torch-2.4" | "hf-safetensors-sharded"
  std::string version;             // Metadata.version (2.4+), else ""
  std::string metadata_class;      // the top-level class as pickled ("...checkpoint.metadata.Metadata")
  nlohmann::json mcore_data;       // Megatron's MCoreMetadata.mcore_data (null when absent)
  std::vector<DcpTensor> tensors;  // sorted by fqn
  std::vector<DcpBytesEntry> bytes;
  std::vector<DcpItem> items;  // storage_data, in pickle order; `file` is not yet resolved
  nlohmann::json planner_data;
  nlohmann::json storage_meta;
  std::vector<PickleGlobal> globals;
};

// Parses `.metadata`'s bytes. Unknown state_dict_metadata classes, missing fields, a chunk outside
// its tensor, an unknown dtype: kCorruption / kNotSupported naming `where` and the fqn. The typed
// reader (formats/dcp_metadata_reader.h) reads what torch writes; any other pickle goes to the
// restricted VM's reading below.
Result<DcpMetadata> parse_dcp_metadata(const uint8_t* data, size_t size, const std::string& where);
// The same of the file at `path`, which the typed reader reads a window at a time.
Result<DcpMetadata> read_dcp_metadata_file(const std::string& path);

// The restricted VM's reading of any pickle (formats/pickle_reader.h), field by field from its JSON;
// bounded by the VM's limits (about 60,000 chunks). The records are not yet finished (below). Public
// so that the conformance test can hold the typed reader to it.
Result<DcpMetadata> read_dcp_metadata_with_vm(const uint8_t* data, size_t size, const std::string& where);

// Field by field, `file` and the safetensors fields included: how the conformance test and the fuzz
// harness hold the typed reader to the VM's reading.
bool operator==(const DcpItem& a, const DcpItem& b);
bool operator==(const DcpChunk& a, const DcpChunk& b);
bool operator==(const DcpTensor& a, const DcpTensor& b);
bool operator==(const DcpBytesEntry& a, const DcpBytesEntry& b);
bool operator==(const DcpMetadata& a, const DcpMetadata& b);  // globals compared by same_listing
// Two listings of one global agree: name, risk, offset, count, lookups, uses and other calls.
bool same_listing(const PickleGlobal& a, const PickleGlobal& b);

// The checks and order both readers give their records: a chunk of the right rank inside its tensor
// (kCorruption naming `at`, the chunk and the dim), then, once all is read, tensors and bytes entries
// sorted by fqn, each tensor's chunks by offsets, and every chunk and bytes entry tied to its item
// (an item listed twice is kCorruption naming `where`).
Status check_dcp_chunk(const DcpChunk& chunk, const std::vector<int64_t>& shape, const std::string& at);
Status finish_dcp_metadata(const std::string& where, DcpMetadata& out);

}  // namespace ckpt
