#include "formats/mapped_tensor_file.h"

namespace ckpt {

Status MappedTensorFile::read_chunk(size_t index, uint64_t offset, void* out, size_t length) const {
  CKPT_RETURN_IF_ERROR(check_chunk_read(path(), chunks_, index, offset, length));
  const ChunkInfo& c = chunks_[index];
  return source_->read_at(c.data_offset + offset, out, length);
}

}  // namespace ckpt
