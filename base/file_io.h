// Durable file operations. The commit protocol (shards/checkpoint_dir.h) is built from these; each
// one either fully succeeds or returns an I/O Status naming the path and errno.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// An open file being written. Close with finish(), which fsyncs; the destructor closes without fsync.
class DurableFile {
 public:
  static Result<DurableFile> create_exclusive(const std::string& path);  // O_EXCL: never overwrites
  DurableFile(DurableFile&& other) noexcept;
  DurableFile& operator=(DurableFile&& other) noexcept;
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  ~DurableFile();

  Status write(const void* data, size_t size);
  Status write_zeros(size_t count);
  uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }
  Status finish();  // fsync + close

 private:
  DurableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;
};

Status fsync_directory(const std::string& dir);
Status make_directory(const std::string& dir);  // mkdir -p semantics
// A fresh, empty directory `<parent>/<prefix>-XXXXXX` (parent "" = $TMPDIR or /tmp, created if
// missing): a run's scratch space that no earlier run can have left anything in.
Result<std::string> make_scratch_directory(const std::string& parent, const std::string& prefix);
// Writes `contents` to `path` atomically: temp file in the same dir, fsync, rename, fsync dir.
Status write_file_atomically(const std::string& path, const std::string& contents);
// Room left after the text read_small_file returns (its capacity): simdjson reads up to this many
// bytes past the end of a document it parses in place (simd_padded).
constexpr size_t kReadPaddingBytes = 64;
Result<std::string> read_small_file(const std::string& path, uint64_t max_bytes);
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);
// Whether `path`, every symlink followed, lies inside `dir` (also followed): a checkpoint's files must,
// or moving the folder (or another folder's link) changes what it holds. False when either is missing.
bool path_resolves_inside(const std::string& dir, const std::string& path);

// Path text only (no file system access): "a/b/c" -> "a/b" and "c"; "c" -> "." and "c".
std::string parent_dir(const std::string& path);
std::string base_name(const std::string& path);
std::string strip_trailing_slashes(std::string path);  // "dir///" -> "dir"; "/" stays

// Every entry under `dir` that is not a directory (symlinks are listed, never followed), as sorted
// paths relative to `dir`, descending at most `max_depth` levels. Unreadable subdirectories are
// skipped: callers compare the listing with what they expect, so a missing file is still found.
std::vector<std::string> list_files_under(const std::string& dir, int max_depth);

}  // namespace ckpt
