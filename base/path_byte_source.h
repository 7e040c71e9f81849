// A file read by its path, opened for each read and closed after it, so that it holds no file
// descriptor between reads. For directories of more files than a process may keep open: a DCP
// checkpoint written one file per item (torch 1.13's FileSystemWriter, or 2.x's with
// single_file_per_rank=False) has one file per chunk, tens of thousands where `ulimit -n` is 1024.
// Every open checks that the path still names the file first measured (device, inode, size): a file
// replaced or resized between reads is an error naming it, never other bytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/byte_source.h"
#include "base/status.h"

namespace ckpt {

class PathByteSource final : public ByteSource {
 public:
  static Result<std::unique_ptr<PathByteSource>> open(const std::string& path);
  uint64_t size() const override { return size_; }
  Status read_at(uint64_t offset, void* out, size_t length) const override;
  const std::string& name() const override { return path_; }
  // One open for the whole range.
  Status scan(uint64_t offset, uint64_t length, size_t block_bytes, const BlockVisitor& visit) const override;

 private:
  PathByteSource(std::string path, dev_t device, ino_t inode, uint64_t size)
      : path_(std::move(path)), device_(device), inode_(inode), size_(size) {}
  // The file, opened again and checked to be the one measured.
  Result<std::unique_ptr<FileByteSource>> reopen() const;

  std::string path_;
  dev_t device_;
  ino_t inode_;
  uint64_t size_;
};

}  // namespace ckpt
