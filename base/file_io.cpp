#include "base/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/huge_pages.h"

namespace ckpt {

namespace {
Status errno_status(const std::string& what, const std::string& path) {
  return Status::io_error(path + ": " + what + ": " + std::strerror(errno));
}
}  // namespace

Result<DurableFile> DurableFile::create_exclusive(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("cannot create", path);
  return DurableFile(fd, path);
}

DurableFile::DurableFile(DurableFile&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), written_(other.written_) {
  other.fd_ = -1;
}

DurableFile& DurableFile::operator=(DurableFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    written_ = other.written_;
    other.fd_ = -1;
  }
  return *this;
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status DurableFile::write(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, p + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("write failed at offset " + std::to_string(written_ + done), path_);
    }
    done += static_cast<size_t>(n);
  }
  written_ += size;
  return Status::ok();
}

Status DurableFile::write_zeros(size_t count) {
  static const uint8_t kZeros[4096] = {};
  while (count > 0) {
    const size_t n = std::min(count, sizeof(kZeros));
    CKPT_RETURN_IF_ERROR(write(kZeros, n));
    count -= n;
  }
  return Status::ok();
}

Status DurableFile::finish() {
  if (fd_ < 0) return Status::io_error(path_ + ": already closed");
  if (::fsync(fd_) != 0) return errno_status("fsync failed", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return errno_status("close failed", path_);
  return Status::ok();
}

Status fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open directory", dir);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    errno = err;
    return errno_status("fsync of directory failed", dir);
  }
  return Status::ok();
}

Result<std::string> make_scratch_directory(const std::string& parent, const std::string& prefix) {
  std::string base = parent;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp && *tmp ? tmp : "/tmp";
  }
  CKPT_RETURN_IF_ERROR(make_directory(base));
  // Absolute: the programs a drill runs get paths under it (CKPTCHECK_CKPT_DIR) and announce paths
  // under those, which are resolved against CKPTCHECK_CKPT_DIR when relative; a relative scratch dir
  // (`make demo`'s build/demo-work) made that join name build/demo-work/.../build/demo-work/...
  if (base[0] != '/') {
    char cwd[4096];
    if (!::getcwd(cwd, sizeof(cwd))) return errno_status("cannot resolve the working directory", base);
    base = std::string(cwd) + "/" + base;
  }
  std::string pattern = base + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    return Status::io_error(base + ": cannot create a scratch dir: " + std::strerror(errno));
  }
  return pattern;
}

Status make_directory(const std::string& dir) {
  if (dir.empty()) return Status::invalid_argument("empty directory path");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_status("cannot create directory", partial);
    }
  }
  if (!is_directory(dir)) return Status::io_error(dir + ": exists and is not a directory");
  return Status::ok();
}

Status write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a leftover from a crashed writer with a recycled pid
  CKPT_ASSIGN_OR_RETURN(auto file, DurableFile::create_exclusive(tmp));
  CKPT_RETURN_IF_ERROR(file.write(contents.data(), contents.size()));
  CKPT_RETURN_IF_ERROR(file.finish());
  if (::rename(tmp.c_str(), path.c_str()) != 0) return errno_status("rename failed", tmp);
  const auto slash = path.find_last_of('/');
  return fsync_directory(slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash));
}

Result<std::string> read_small_file(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::io_error(path + ": not a regular file");
  }
  // Read to EOF rather than trusting st_size: /proc files report 0 bytes and are not empty. The
  // size it reports is read straight into place, in huge pages, with room left after it for the
  // padding simdjson reads past the end (simd_padded then parses an 84 MB manifest without a copy).
  std::string out;
  const uint64_t expected = std::min<uint64_t>(static_cast<uint64_t>(st.st_size), max_bytes + 1);
  if (expected > 0) {
    out.reserve(static_cast<size_t>(expected) + kReadPaddingBytes);
    advise_huge_pages(out.data(), out.capacity());
  }
  // One read, retried on EINTR; its error closes the file and names it.
  auto read_into = [&](char* into, size_t n) -> Result<size_t> {
    for (;;) {
      const ssize_t got = ::read(fd, into, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno == EINTR) continue;
      const Status status = errno_status("read failed", path);
      ::close(fd);
      return status;
    }
  };
  size_t filled = 0;
  out.resize(static_cast<size_t>(expected));
  while (filled < out.size()) {
    CKPT_ASSIGN_OR_RETURN(const size_t n, read_into(&out[filled], out.size() - filled));
    if (n == 0) break;
    filled += n;
  }
  out.resize(filled);
  char buf[65536];  // what lies past the size fstat gave: a growing file, a /proc file
  for (;;) {
    if (filled > max_bytes) {
      ::close(fd);
      return Status::corruption(path + ": more than the limit of " + std::to_string(max_bytes) + " bytes");
    }
    CKPT_ASSIGN_OR_RETURN(const size_t n, read_into(buf, sizeof(buf)));
    if (n == 0) break;
    out.append(buf, n);
    filled += n;
  }
  ::close(fd);
  return out;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool path_resolves_inside(const std::string& dir, const std::string& path) {
  char dir_real[PATH_MAX], file_real[PATH_MAX];
  if (!::realpath(dir.c_str(), dir_real) || !::realpath(path.c_str(), file_real)) return false;
  const std::string prefix = std::string(dir_real) + "/";
  return std::string(file_real).compare(0, prefix.size(), prefix) == 0;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {

void walk_files(const std::string& dir, const std::string& relative, int depth, int max_depth,
                std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string rel = relative.empty() ? name : relative + "/" + name;
    struct stat st {};
    if (::lstat((dir + "/" + name).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < max_depth) walk_files(dir + "/" + name, rel, depth + 1, max_depth, out);
    } else {
      out.push_back(rel);
    }
  }
  ::closedir(d);
}

}  // namespace

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::vector<std::string> list_files_under(const std::string& dir, int max_depth) {
  std::vector<std::string> out;
  walk_files(dir, "", 0, max_depth, out);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ckpt
