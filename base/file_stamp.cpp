#include "base/file_stamp.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ckpt {

namespace {

int64_t nanoseconds(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

}  // namespace

bool FileStamp::operator==(const FileStamp& other) const {
  return device == other.device && inode == other.inode && bytes == other.bytes &&
         modified_ns == other.modified_ns && changed_ns == other.changed_ns && regular == other.regular;
}

Result<FileStamp> stamp_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::io_error(path + ": cannot stat: " + std::strerror(errno));
  return FileStamp{st.st_dev,
                   st.st_ino,
                   static_cast<uint64_t>(st.st_size),
                   nanoseconds(st.st_mtim),
                   nanoseconds(st.st_ctim),
                   S_ISREG(st.st_mode)};
}

}  // namespace ckpt
