#include "formats/tensor_file.h"

#include "base/json_fields.h"

namespace ckpt {

nlohmann::json ChunkInfo::to_json() const {
  return {{"name", name},
          {"component", component},
          {"dtype", dtype_name(dtype)},
          {"global_shape", global_shape},
          {"offsets", offsets},
          {"shape", shape},
          {"data_offset", data_offset},
          {"data_bytes", data_bytes},
          {"sha256", sha256}};
}

namespace {

// `named`: errors say "<where> (<tensor name>)". ChunkInfo::from_json parses without that first
// and builds it only for a chunk that fails, so that a header of hundreds of thousands of chunks
// does not allocate an error context per chunk.
Result<ChunkInfo> chunk_from_json(const nlohmann::json& j, const std::string& where, bool named) {
  ChunkInfo c;
  CKPT_ASSIGN_OR_RETURN(c.name, json_string(j, "name", where));
  if (c.name.empty() || c.name.size() > kMaxChunkNameBytes) {
    return Status::corruption(where + ": tensor name is empty or longer than " +
                              std::to_string(kMaxChunkNameBytes));
  }
  std::string named_where;
  if (named) named_where = where + " (" + c.name + ")";
  const std::string& at = named ? named_where : where;
  CKPT_ASSIGN_OR_RETURN(c.component, json_string(j, "component", at));
  CKPT_ASSIGN_OR_RETURN(std::string dtype, json_string(j, "dtype", at));
  auto parsed = dtype_from_name(dtype);
  if (!parsed) return Status::corruption(at + ": unknown dtype '" + dtype + "'");
  c.dtype = *parsed;
  CKPT_ASSIGN_OR_RETURN(c.global_shape, json_dims(j, "global_shape", at));
  CKPT_ASSIGN_OR_RETURN(c.offsets, json_dims(j, "offsets", at));
  CKPT_ASSIGN_OR_RETURN(c.shape, json_dims(j, "shape", at));
  CKPT_ASSIGN_OR_RETURN(c.data_offset, json_uint(j, "data_offset", at));
  CKPT_ASSIGN_OR_RETURN(c.data_bytes, json_uint(j, "data_bytes", at));
  CKPT_ASSIGN_OR_RETURN(c.sha256, json_string(j, "sha256", at));
  if (c.sha256.size() != 64) return Status::corruption(at + ": sha256 is not 64 hex digits");
  if (c.offsets.size() != c.global_shape.size() || c.shape.size() != c.global_shape.size()) {
    return Status::corruption(at + ": rank mismatch: global_shape " + shape_to_string(c.global_shape) +
                              ", offsets " + shape_to_string(c.offsets) + ", shape " +
                              shape_to_string(c.shape));
  }
  for (size_t d = 0; d < c.shape.size(); ++d) {
    if (c.offsets[d] > c.global_shape[d] || c.shape[d] > c.global_shape[d] - c.offsets[d]) {
      return Status::corruption(at + ": chunk " + c.label() + " lies outside global shape " +
                                shape_to_string(c.global_shape) + " in dim " + std::to_string(d));
    }
  }
  if (!checked_numel(c.global_shape)) return Status::corruption(at + ": global shape overflows");
  auto nbytes = checked_nbytes(c.shape, c.dtype);
  if (!nbytes || *nbytes != c.data_bytes) {
    return Status::corruption(at + ": data_bytes " + std::to_string(c.data_bytes) + " but shape " +
                              shape_to_string(c.shape) + " of " + dtype + " needs " +
                              (nbytes ? std::to_string(*nbytes) : std::string("an overflowing size")));
  }
  return c;
}

}  // namespace

bool chunk_entry_is_consistent(std::string_view name, DType dtype, DimsView global_shape, DimsView offsets,
                               DimsView shape, uint64_t data_bytes, std::string_view sha256) {
  if (name.empty() || name.size() > kMaxChunkNameBytes || sha256.size() != 64) return false;
  if (!chunk_lies_inside(global_shape, offsets, shape) || !checked_numel(global_shape)) return false;
  const auto nbytes = checked_nbytes(shape, dtype);
  return nbytes && *nbytes == data_bytes;
}

Result<ChunkInfo> ChunkInfo::from_json(const nlohmann::json& j, const std::string& where) {
  Result<ChunkInfo> c = chunk_from_json(j, where, /*named=*/false);
  if (c.is_ok()) return c;
  return chunk_from_json(j, where, /*named=*/true);
}

Result<ChunkInfo> ChunkInfo::from_json(const nlohmann::json& j, const std::function<std::string()>& where) {
  static const std::string kUnnamed;
  Result<ChunkInfo> c = chunk_from_json(j, kUnnamed, /*named=*/false);
  if (c.is_ok()) return c;
  return chunk_from_json(j, where(), /*named=*/true);
}

std::string chunk_label(const std::string& name, DimsView global_shape, DimsView offsets, DimsView shape) {
  bool whole = offsets.size() == global_shape.size() && shape == global_shape;
  for (int64_t o : offsets) whole = whole && o == 0;
  if (whole) return name;
  std::string s = name + "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) s += ", ";
    const int64_t begin = d < offsets.size() ? offsets[d] : 0;
    s += std::to_string(begin) + ":" + std::to_string(begin + shape[d]);
  }
  return s + "]";
}

std::string ChunkInfo::label() const {
  return chunk_label(name, global_shape, offsets, shape);
}

}  // namespace ckpt

#include "base/sha256.h"

namespace ckpt {

const std::vector<PickleGlobal>& TensorFile::pickle_globals() const {
  static const std::vector<PickleGlobal> kNone;
  return kNone;
}

Status stream_chunk(const TensorFile& file, size_t index,
                    const std::function<void(const uint8_t*, size_t)>& sink) {
  // Small enough to stay in L2 between the read's copy and the sink's passes (hash, NaN count,
  // statistics), so only the copy touches DRAM.
  constexpr uint64_t kBuffer = 256 << 10;
  const ChunkInfo& c = file.chunks()[index];
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min<uint64_t>(c.data_bytes, kBuffer)));
  for (uint64_t done = 0; done < c.data_bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(c.data_bytes - done, buffer.size()));
    CKPT_RETURN_IF_ERROR(file.read_chunk(index, done, buffer.data(), n));
    sink(buffer.data(), n);
    done += n;
  }
  return Status::ok();
}

Result<std::string> hash_chunk(const TensorFile& file, size_t index) {
  Sha256 h;
  CKPT_RETURN_IF_ERROR(stream_chunk(file, index, [&](const uint8_t* p, size_t n) { h.update(p, n); }));
  return h.finish_hex();
}

Result<std::vector<uint8_t>> read_whole_chunk(const TensorFile& file, size_t index) {
  const ChunkInfo& c = file.chunks()[index];
  std::vector<uint8_t> bytes(static_cast<size_t>(c.data_bytes));
  CKPT_RETURN_IF_ERROR(file.read_chunk(index, 0, bytes.data(), bytes.size()));
  return bytes;
}

bool chunk_lies_inside(DimsView global_shape, DimsView offsets, DimsView shape) {
  if (offsets.size() != global_shape.size() || shape.size() != global_shape.size()) return false;
  for (size_t d = 0; d < global_shape.size(); ++d) {
    if (offsets[d] < 0 || shape[d] < 0 || offsets[d] > global_shape[d] ||
        shape[d] > global_shape[d] - offsets[d])
      return false;
  }
  return true;
}

Status check_chunk_read(const std::string& path, const std::vector<ChunkInfo>& chunks, size_t index,
                        uint64_t offset, size_t length) {
  if (index >= chunks.size()) {
    return Status::invalid_argument(path + ": chunk index " + std::to_string(index) + " out of range (" +
                                    std::to_string(chunks.size()) + " chunks)");
  }
  const ChunkInfo& c = chunks[index];
  if (!range_within(offset, length, c.data_bytes)) {
    return Status::invalid_argument(path + ": read of " + std::to_string(length) + " bytes at " +
                                    std::to_string(offset) + " past the end of " + c.label() + " (" +
                                    std::to_string(c.data_bytes) + " bytes)");
  }
  return Status::ok();
}

}  // namespace ckpt
