#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {
Status errno_status(const std::string& what, const std::string& path) {
  return Status::io_error(path + ": " + what + ": " + std::strerror(errno));
}
}  // namespace

Status read_files_once(const std::vector<std::string>& paths) {
  std::vector<char> buffer(4 * kMiB);
  for (const auto& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status("open", path);
    ssize_t n;
    while ((n = ::read(fd, buffer.data(), buffer.size())) != 0) {
      if (n < 0 && errno != EINTR) {
        ::close(fd);
        return errno_status("read", path);
      }
    }
    ::close(fd);
  }
  return Status::ok();
}

Status fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::ok() : errno_status("fsync", path);
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::io_error(path + ": cannot remove: " + ec.message());
  return Status::ok();
}

}  // namespace ckpt::bench
