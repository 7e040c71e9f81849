#include "base/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ckpt {

bool range_within(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
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
  if (!range_within(offset, length, size_)) {
    return Status::truncated(path_ + ": read of " + std::to_string(length) + " bytes at offset " +
                             std::to_string(offset) + " past end of file (" + std::to_string(size_) +
                             " bytes)");
  }
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
  if (!range_within(offset, length, bytes_.size())) {
    return Status::truncated(name_ + ": read of " + std::to_string(length) + " bytes at offset " +
                             std::to_string(offset) + " past end (" + std::to_string(bytes_.size()) +
                             " bytes)");
  }
  if (length) std::memcpy(out, bytes_.data() + offset, length);
  return Status::ok();
}

}  // namespace ckpt
