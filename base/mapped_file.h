// A whole file mapped read-only into memory. The loader hands out tensors that point straight
// into the page cache (zero-copy, as safetensors does) instead of reading every byte into a
// second buffer; shared ownership keeps the mapping alive as long as any tensor view needs it.
//
// Caveat, documented rather than handled: a file truncated by another process while mapped makes
// the next access to the lost pages raise SIGBUS. Committed checkpoint files are never rewritten
// by ckptcheck (the commit protocol only creates new directories), and `verify` never maps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_bytes_ = 0;  // what munmap releases (whole pages)
};

}  // namespace ckpt
