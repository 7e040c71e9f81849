#include "formats/mapped_tensor_file.h"

namespace ckpt {

Status MappedTensorFile::read_chunk(size_t index, uint64_t offset, void* out, size_t length) const {
  if (index >= chunks_.size()) {
    return Status::invalid_argument(path() + ": chunk index " + std::to_string(index) + " out of range (" +
                                    std::to_string(chunks_.size()) + " chunks)");
  }
  const ChunkInfo& c = chunks_[index];
  if (!range_within(offset, length, c.data_bytes)) {
    return Status::invalid_argument(path() + ": read of " + std::to_string(length) + " bytes at " +
                                    std::to_string(offset) + " past the end of " + c.label() + " (" +
                                    std::to_string(c.data_bytes) + " bytes)");
  }
  return source_->read_at(c.data_offset + offset, out, length);
}

}  // namespace ckpt
