// What a file looked like when it was first read: its identity (device, inode), size and times.
// A reader that checks bytes first and copies them later (convert) stamps the files before the
// check and compares after the copy: a file written in between (which changes its modification
// and change times), replaced or resized is refused, as tar refuses a "file changed as we read it".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <string>

#include "base/status.h"

namespace ckpt {

struct FileStamp {
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t bytes = 0;
  int64_t modified_ns = 0;
  int64_t changed_ns = 0;  // the inode's change time: set by every write, even one that restores mtime
  bool regular = false;    // a regular file (a directory's times do not change when a file in it is written)

  bool operator==(const FileStamp& other) const;
  bool operator!=(const FileStamp& other) const { return !(*this == other); }
};

// A file time (st_mtim, st_ctim) as nanoseconds since the epoch.
int64_t nanoseconds_of(const struct timespec& time);

// The stamp of the file `path` names now (following links), or why it cannot be taken.
Result<FileStamp> stamp_file(const std::string& path);

}  // namespace ckpt
