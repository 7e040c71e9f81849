#include "formats/tensor_file.h"

namespace ckpt {

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
