#include "base/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ckpt {

bool range_within(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

Status check_range(const ByteSource& source, uint64_t offset, uint64_t length) {
  if (range_within(offset, length, source.size())) return Status::ok();
  return Status::truncated(source.name() + ": read of " + std::to_string(length) + " bytes at offset " +
                           std::to_string(offset) + " past end (" + std::to_string(source.size()) +
                           " bytes)");
}

Result<std::unique_ptr<FileByteSource>> FileByteSource::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::io_error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::io_error(path + ": not a regular file");
  }
  return std::unique_ptr<FileByteSource>(new FileByteSource(fd, static_cast<uint64_t>(st.st_size), path));
}

FileByteSource::~FileByteSource() {
  ::close(fd_);
}

Status FileByteSource::read_at(uint64_t offset, void* out, size_t length) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  auto* dst = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, dst + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(path_ + ": read failed at offset " + std::to_string(offset + done) + ": " +
                              std::strerror(errno));
    }
    if (n == 0) {
      return Status::truncated(path_ + ": file shrank while reading at offset " +
                               std::to_string(offset + done));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status MemoryByteSource::read_at(uint64_t offset, void* out, size_t length) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  if (length) std::memcpy(out, bytes_.data() + offset, length);
  return Status::ok();
}

namespace {

// Calls visit_block(at, n) for consecutive blocks of at most `block_bytes` covering the range,
// stopping at the first error.
template <typename VisitBlock>
Status for_each_block(uint64_t offset, uint64_t length, size_t block_bytes, VisitBlock&& visit_block) {
  block_bytes = std::max<size_t>(1, block_bytes);
  for (uint64_t at = offset; at < offset + length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block_bytes, offset + length - at));
    CKPT_RETURN_IF_ERROR(visit_block(at, n));
    at += n;
  }
  return Status::ok();
}

}  // namespace

Status MemoryByteSource::scan(uint64_t offset, uint64_t length, size_t block_bytes,
                              const BlockVisitor& visit) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  return for_each_block(offset, length, block_bytes, [&](uint64_t at, size_t n) {
    visit(at, bytes_.data() + at, n);
    return Status::ok();
  });
}

Status ByteSource::scan(uint64_t offset, uint64_t length, size_t block_bytes,
                        const BlockVisitor& visit) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  std::vector<uint8_t> block(
      static_cast<size_t>(std::min<uint64_t>(std::max<size_t>(1, block_bytes), length)));
  return for_each_block(offset, length, block.size(), [&](uint64_t at, size_t n) {
    CKPT_RETURN_IF_ERROR(read_at(at, block.data(), n));
    visit(at, block.data(), n);
    return Status::ok();
  });
}

}  // namespace ckpt
