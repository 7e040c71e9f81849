// One file of tensors, whatever its format. `inspect`, `diff`, `convert` and `verify` see every
// shard format (native, safetensors, HDF5, PyTorch .pt) through this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/byte_source.h"
#include "base/dims.h"
#include "base/status.h"
#include "formats/dtype.h"
#include "formats/pickle_globals.h"
#include "formats/py_value.h"

namespace ckpt {

// A rectangular piece of a global tensor, and where its bytes live in a file.
struct ChunkInfo {
  std::string name;       // the global tensor's name: "model.layers.0.attn.w_qkv"
  std::string component;  // model | optimizer | scheduler | scaler | rng | data | progress | other
  DType dtype = DType::kF32;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;  // first index of the chunk in each dim of the global tensor
  std::vector<int64_t> shape;    // the chunk's own shape
  uint64_t data_offset = 0;      // byte offset of the payload in the file (row-major, little-endian)
  uint64_t data_bytes = 0;
  std::string sha256;  // hex SHA-256 of the payload; empty if the format stores none
  // A second name for the chunk named here (a torch.save pickle that references one tensor object
  // twice: tied weights). Its bytes are that chunk's; checks that read bytes read them once.
  // Never written to a native header. Empty by default, so the brace lists that build chunks
  // (every test) may end at sha256.
  std::string alias_of = {};

  // "model.w[0:128, 0:64]" — how chunks are named in messages.
  std::string label() const;
  // Every field under its own name, dtype by name: the native header's chunk entry, and what a
  // rank reports to rank 0 about the chunks it wrote.
  nlohmann::json to_json() const;
  // The strict inverse of to_json() for untrusted entries: every field present and typed, the name
  // bounded, the chunk inside its global shape, data_bytes equal to shape x dtype size.
  static Result<ChunkInfo> from_json(const nlohmann::json& j, const std::string& where);
  // The same, with the error context built only when the chunk is refused (headers of many chunks).
  static Result<ChunkInfo> from_json(const nlohmann::json& j, const std::function<std::string()>& where);
};

// "model.w[0:128, 0:64]", or the bare name for a chunk that is its whole tensor: ChunkInfo::label
// of a chunk held as separate fields.
std::string chunk_label(const std::string& name, DimsView global_shape, DimsView offsets, DimsView shape);

// Whether a chunk at `offsets` of `shape` lies inside a tensor of `global_shape`: the same rank, and
// in every dim 0 <= offsets, 0 <= shape, offsets + shape <= global (without overflow). What every
// reader of a chunk table checks before it copies a chunk into its tensor.
bool chunk_lies_inside(DimsView global_shape, DimsView offsets, DimsView shape);

// Longest tensor name a chunk entry may carry.
constexpr size_t kMaxChunkNameBytes = 4096;

// What a header's chunk entry must hold, past its types (ChunkInfo::from_json's checks, which say
// which one failed): a name of 1 to kMaxChunkNameBytes bytes, a 64-character sha256, the chunk
// inside a global shape whose element count does not overflow, and data_bytes equal to shape x
// dtype size. For the readers that take or refuse an entry without saying why.
bool chunk_entry_is_consistent(std::string_view name, DType dtype, DimsView global_shape, DimsView offsets,
                               DimsView shape, uint64_t data_bytes, std::string_view sha256);

// What every read_chunk checks first: `index` names one of `chunks` and [offset, offset + length)
// lies inside its payload. kInvalidArgument naming `path` and the chunk otherwise.
Status check_chunk_read(const std::string& path, const std::vector<ChunkInfo>& chunks, size_t index,
                        uint64_t offset, size_t length);

class TensorFile {
 public:
  virtual ~TensorFile() = default;
  virtual const std::string& path() const = 0;
  virtual const char* format_name() const = 0;  // "native" | "safetensors" | "hdf5" | "pytorch"
  virtual const std::vector<ChunkInfo>& chunks() const = 0;
  // Format-level metadata: step, shard index and count, pins, whatever the file carries.
  virtual const nlohmann::json& metadata() const = 0;
  // The file's whole value as Python holds it, typed (formats/py_value.h), where the format is a
  // pickle (torch.save); null where metadata() is all there is.
  virtual PyValuePtr state_value() const { return nullptr; }
  // Reads `length` bytes starting `offset` bytes into chunk `index`'s payload.
  virtual Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const = 0;
  // The source in which every chunk's payload is the plain byte range [data_offset, data_offset +
  // data_bytes), or null if payloads are not stored that way. The loader maps such files instead
  // of reading them (shards/checkpoint_reader.h).
  virtual const ByteSource* payload_source() const { return nullptr; }
  // Whether chunk `index`'s [data_offset, data_offset + data_bytes) is a plain byte range of the
  // file, which a seal can hash in place: every chunk of a file with a payload_source(); a container
  // whose members may be stored or deflated (a .keras zip) says chunk by chunk.
  virtual bool chunk_is_file_range(size_t index) const {
    (void)index;
    return payload_source() != nullptr;
  }
  // Byte ranges of the file that hold tensors in a form no plain range shows (a deflated zip member:
  // its compressed bytes), named for reports ("model.weights.h5"): a seal covers each whole. Empty
  // for formats whose chunks are all file ranges.
  struct PackedRange {
    std::string name;
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  virtual std::vector<PackedRange> packed_payload_ranges() const { return {}; }
  // Every global the file's pickle names, with its risk (formats/pickle_globals.h); empty for
  // formats without pickles.
  virtual const std::vector<PickleGlobal>& pickle_globals() const;
  // Checks of the container that need a full read and belong to no chunk: a torch.save zip's
  // CRC-32 of every member. OK for formats without such checks.
  virtual Status check_container() const { return Status::ok(); }
  // The part of check_container that reads no payload: a torch.save zip's CRC-32 of the members
  // read for the structure (data.pkl, version, byteorder), which --quick reads anyway; a changed
  // byte there changes what torch.load builds (a key renamed), so --quick checks it too.
  virtual Status check_structure_members() const { return Status::ok(); }
  // The byte ranges [begin, end) of the file that check_container finds damaged (a torch.save zip
  // member whose CRC-32 differs), so that a report names the tensors stored there; empty for
  // formats without such checks, or when nothing is damaged.
  virtual std::vector<std::pair<uint64_t, uint64_t>> damaged_ranges() const { return {}; }
};

}  // namespace ckpt

namespace ckpt {

// Reads chunk `index`'s payload in order through a bounded buffer, handing each piece to `sink`:
// the one read loop behind hashing, NaN counting and statistics.
Status stream_chunk(const TensorFile& file, size_t index,
                    const std::function<void(const uint8_t*, size_t)>& sink);
// Streams a chunk's payload through SHA-256 with a bounded buffer.
Result<std::string> hash_chunk(const TensorFile& file, size_t index);
// Reads a whole chunk payload into memory (callers bound the size first).
Result<std::vector<uint8_t>> read_whole_chunk(const TensorFile& file, size_t index);

}  // namespace ckpt
