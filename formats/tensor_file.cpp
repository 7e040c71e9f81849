#include "formats/tensor_file.h"

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

std::string ChunkInfo::label() const {
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

}  // namespace ckpt

#include "formats/sha256.h"

namespace ckpt {

Result<std::string> hash_chunk(const TensorFile& file, size_t index) {
  constexpr uint64_t kBuffer = 1 << 20;
  const ChunkInfo& c = file.chunks()[index];
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min<uint64_t>(c.data_bytes, kBuffer)));
  Sha256 h;
  for (uint64_t done = 0; done < c.data_bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(c.data_bytes - done, buffer.size()));
    CKPT_RETURN_IF_ERROR(file.read_chunk(index, done, buffer.data(), n));
    h.update(buffer.data(), n);
    done += n;
  }
  return h.finish_hex();
}

Result<std::vector<uint8_t>> read_whole_chunk(const TensorFile& file, size_t index) {
  const ChunkInfo& c = file.chunks()[index];
  std::vector<uint8_t> bytes(static_cast<size_t>(c.data_bytes));
  CKPT_RETURN_IF_ERROR(file.read_chunk(index, 0, bytes.data(), bytes.size()));
  return bytes;
}

}  // namespace ckpt
