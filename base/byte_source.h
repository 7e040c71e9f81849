// Where a reader's bytes come from. Readers take a ByteSource, never a path, so tests run them on
// in-memory bytes and the fuzz test mutates buffers without touching the disk.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// The block size for streaming: small enough to stay in L2 between the read and whatever runs over
// the block (a hash, then a NaN count), large enough to amortise the read's system call.
constexpr size_t kStreamBlockBytes = 256 << 10;

// Called with consecutive blocks of a range, in order; `data` is valid only during the call.
using BlockVisitor = std::function<void(uint64_t offset, const uint8_t* data, size_t size)>;

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly `length` bytes at `offset`; a range past the end is a kTruncated error.
  virtual Status read_at(uint64_t offset, void* out, size_t length) const = 0;
  // A name for messages: the file path, or "<memory>".
  virtual const std::string& name() const = 0;
  // Hands [offset, offset + length) to `visit` in consecutive blocks of at most `block_bytes`: how
  // hashing and verify's scan stream bytes. This default reads each block into one buffer that
  // stays in L2 for whatever the visitor runs over it (a hash, then a NaN count); memory hands
  // out its own bytes. Mapping page-cached files instead was measured and not kept: ckptcheck
  // issue 19's note in bench/README.md says why.
  virtual Status scan(uint64_t offset, uint64_t length, size_t block_bytes, const BlockVisitor& visit) const;
};

// pread(2)-based: thread-safe, no shared file position, so shards hash in parallel.
class FileByteSource final : public ByteSource {
 public:
  static Result<std::unique_ptr<FileByteSource>> open(const std::string& path);
  ~FileByteSource() override;
  uint64_t size() const override { return size_; }
  Status read_at(uint64_t offset, void* out, size_t length) const override;
  const std::string& name() const override { return path_; }
  int fd() const { return fd_; }  // for mapping (formats/mapped_file.h); owned by this source

 private:
  FileByteSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_;
  uint64_t size_;
  std::string path_;
};

class MemoryByteSource final : public ByteSource {
 public:
  explicit MemoryByteSource(std::vector<uint8_t> bytes, std::string name = "<memory>")
      : bytes_(std::move(bytes)), name_(std::move(name)) {}
  uint64_t size() const override { return bytes_.size(); }
  Status read_at(uint64_t offset, void* out, size_t length) const override;
  const std::string& name() const override { return name_; }
  Status scan(uint64_t offset, uint64_t length, size_t block_bytes, const BlockVisitor& visit) const override;
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
};

// Checks that [offset, offset+length) lies inside [0, size) without overflow.
bool range_within(uint64_t offset, uint64_t length, uint64_t size);
// OK, or the kTruncated error naming the source when [offset, offset+length) runs past its end.
Status check_range(const ByteSource& source, uint64_t offset, uint64_t length);

}  // namespace ckpt
