// A whole file mapped read-only into memory. The loader hands out tensors that point straight
// into the page cache (zero-copy, as safetensors does) instead of reading every byte into a
// second buffer; shared ownership keeps the mapping alive as long as any tensor view needs it.
//
// A file truncated by another process while mapped makes the next access to the lost pages raise
// SIGBUS. ckptcheck never rewrites committed files (the commit protocol only creates new
// directories), but another program may. The loader's own reads of mappings go through
// guarded_copy / guarded_access below, which turn that SIGBUS into an I/O error naming the file and
// the offset; code that reads a view without them (a consumer's own memcpy) still gets the signal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/byte_source.h"
#include "base/status.h"

namespace ckpt {

class MappedFile {
 public:
  // Maps the file `source` has open (the very file its reader parsed, even if the path has since
  // been replaced), `source.size()` bytes. Pages are mapped on first touch or by populate().
  static Result<std::shared_ptr<const MappedFile>> map(const FileByteSource& source);
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);

  // One piece of a file, for stitch().
  struct FileRange {
    const FileByteSource* source = nullptr;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  // Maps the ranges back to back into one contiguous read-only range, so a tensor whose row
  // blocks live in different shard files is still one zero-copy array. Requires every offset to
  // be a multiple of page_size() and every length but the last to be one too (can_stitch).
  static Result<std::shared_ptr<const MappedFile>> stitch(const std::vector<FileRange>& ranges);
  static bool can_stitch(const std::vector<FileRange>& ranges);
  static uint64_t page_size();

  // Faults [data, data + size) of a mapping in now, so later reads take no page faults.
  static void populate(const uint8_t* data, uint64_t size);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, uint64_t size, uint64_t mapped_bytes)
      : data_(data), size_(size), mapped_bytes_(mapped_bytes) {}
  // Records [at, at + length) as bytes of `path` from `file_offset`, for guarded reads' messages.
  void register_piece(const uint8_t* at, uint64_t length, const std::string& path, uint64_t file_offset);
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_bytes_ = 0;           // what munmap releases (whole pages)
  std::vector<const uint8_t*> pieces_;  // registered piece starts, unregistered before munmap
};

// Copies `n` bytes from `src` (typically inside a MappedFile) to `dst`. If the file under the
// mapping shrank, the copy's SIGBUS becomes Status::io_error("<file>: shrank while mapped (SIGBUS at
// offset N)"), N being the offset in that file, the file found from the faulting address among live
// mappings (`what` and the offset from `src` if the address is in none). Any thread; a SIGBUS
// outside a guarded read keeps its usual effect (the handler chains to the previous action).
Status guarded_copy(void* dst, const void* src, size_t n, const std::string& what);

// Runs `access()`, which reads mapped memory from `src` on, under the same guard. A SIGBUS leaves
// `access` by siglongjmp: it must own no objects with destructors (they would be skipped) and hold
// no locks.
Status guarded_access_impl(const void* src, const std::string& what, void (*access)(void*), void* context);
template <typename F>
Status guarded_access(const void* src, const std::string& what, F&& access) {
  using Fn = std::remove_reference_t<F>;
  return guarded_access_impl(
      src, what, [](void* c) { (*static_cast<Fn*>(c))(); },
      const_cast<void*>(static_cast<const void*>(&access)));
}

}  // namespace ckpt
