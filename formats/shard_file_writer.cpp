#include "formats/shard_file_writer.h"

namespace ckpt {

Status check_chunk_geometry(const ChunkInfo& chunk, const std::string& where) {
  // Not chunk.label(): it adds offsets to sizes, which may overflow before they are validated.
  const std::string label = where + ": chunk " + chunk.name + " (offsets " + shape_to_string(chunk.offsets) +
                            ", shape " + shape_to_string(chunk.shape) + ")";
  if (chunk.name.empty()) return Status::invalid_argument(where + ": chunk with an empty tensor name");
  if (chunk.global_shape.size() != chunk.shape.size() || chunk.offsets.size() != chunk.shape.size()) {
    return Status::corruption(label + ": rank mismatch: shape has " + std::to_string(chunk.shape.size()) +
                              " dims, global_shape " + std::to_string(chunk.global_shape.size()) +
                              ", offsets " + std::to_string(chunk.offsets.size()));
  }
  for (size_t d = 0; d < chunk.shape.size(); ++d) {
    const int64_t off = chunk.offsets[d], len = chunk.shape[d], global = chunk.global_shape[d];
    if (off < 0 || len < 0 || global < 0 || off > global || len > global - off) {
      return Status::corruption(label + ": dim " + std::to_string(d) + ": offset " + std::to_string(off) +
                                " + size " + std::to_string(len) + " exceeds global size " +
                                std::to_string(global));
    }
  }
  const auto nbytes = checked_nbytes(chunk.shape, chunk.dtype);
  if (!nbytes) return Status::corruption(label + ": shape " + shape_to_string(chunk.shape) + " overflows");
  if (*nbytes != chunk.data_bytes) {
    return Status::corruption(label + ": expected " + std::to_string(*nbytes) + " bytes for " +
                              dtype_name(chunk.dtype) + " " + shape_to_string(chunk.shape) + ", got " +
                              std::to_string(chunk.data_bytes));
  }
  return Status::ok();
}

Status check_chunk_payloads(const std::vector<ChunkPayload>& chunks) {
  for (const auto& c : chunks) {
    Status s = check_chunk_geometry(c.info, "write");
    if (!s.is_ok()) return Status::invalid_argument(s.message());
    if (c.data == nullptr && c.reader == nullptr && c.info.data_bytes != 0) {
      return Status::invalid_argument("write: chunk " + c.info.name + ": null payload");
    }
  }
  return Status::ok();
}

Status append_payload(StreamingFileWriter& file, const ChunkPayload& chunk, uint64_t bytes, Sha256* hash) {
  const auto size = static_cast<size_t>(bytes);
  if (chunk.data || size == 0) return file.append(chunk.data, size, hash);
  if (!chunk.reader)
    return Status::invalid_argument(file.path() + ": chunk " + chunk.info.name + ": null payload");
  uint64_t at = chunk.reader_byte_begin;
  return file.append_filled(
      size,
      [&](uint8_t* out, size_t n) {
        const Status read = chunk.reader->read(chunk.reader_tensor, at, out, n);
        at += n;
        return read;
      },
      hash);
}

}  // namespace ckpt
