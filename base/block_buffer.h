// A read buffer recycled through a small per-thread free list.
//
// Why: the hashing workers of verify and seal stream each unit (a seal piece, a scan unit) through
// a block buffer. A fresh std::vector per unit is zero-filled and, once glibc hands the memory
// back to the kernel, faulted in again: with 1 MiB seal pieces that cost a third of verify's time
// (memset and page faults in `perf`). A worker reuses the same few buffers instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ckpt {

class BlockBuffer {
 public:
  explicit BlockBuffer(size_t bytes);
  ~BlockBuffer();
  BlockBuffer(const BlockBuffer&) = delete;
  BlockBuffer& operator=(const BlockBuffer&) = delete;

  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return size_; }

 private:
  std::vector<uint8_t> bytes_;  // at least size_ bytes; its contents are whatever was read last
  size_t size_;
};

}  // namespace ckpt
