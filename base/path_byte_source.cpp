#include "base/path_byte_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ckpt {

namespace {

Result<struct stat> stat_of(const FileByteSource& file) {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0)
    return Status::io_error(file.name() + ": cannot stat: " + std::strerror(errno));
  return st;
}

}  // namespace

Result<std::unique_ptr<PathByteSource>> PathByteSource::open(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto file, FileByteSource::open(path));
  CKPT_ASSIGN_OR_RETURN(struct stat st, stat_of(*file));
  return std::unique_ptr<PathByteSource>(new PathByteSource(path, st.st_dev, st.st_ino, file->size()));
}

Result<std::unique_ptr<FileByteSource>> PathByteSource::reopen() const {
  CKPT_ASSIGN_OR_RETURN(auto file, FileByteSource::open(path_));
  CKPT_ASSIGN_OR_RETURN(struct stat st, stat_of(*file));
  if (st.st_dev != device_ || st.st_ino != inode_ || file->size() != size_) {
    return Status::io_error(path_ + ": replaced since it was first opened (was inode " +
                            std::to_string(inode_) + ", " + std::to_string(size_) + " bytes; now inode " +
                            std::to_string(st.st_ino) + ", " + std::to_string(file->size()) + " bytes)");
  }
  return file;
}

Status PathByteSource::read_at(uint64_t offset, void* out, size_t length) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  CKPT_ASSIGN_OR_RETURN(auto file, reopen());
  return file->read_at(offset, out, length);
}

Status PathByteSource::scan(uint64_t offset, uint64_t length, size_t block_bytes,
                            const BlockVisitor& visit) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  CKPT_ASSIGN_OR_RETURN(auto file, reopen());
  return file->scan(offset, length, block_bytes, visit);
}

}  // namespace ckpt
