#include "base/file_stamp.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ckpt {

int64_t nanoseconds_of(const struct timespec& time) {
  return static_cast<int64_t>(time.tv_sec) * 1000000000 + time.tv_nsec;
}

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
                   nanoseconds_of(st.st_mtim),
                   nanoseconds_of(st.st_ctim),
                   S_ISREG(st.st_mode)};
}

}  // namespace ckpt
