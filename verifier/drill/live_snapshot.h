// A snapshot of a live run's checkpoint, taken before its retention deletes it: every file hard
// linked into the drill's work dir (a link keeps the bytes when the run unlinks the original; a
// copy where the work dir is on another filesystem), then every source file checked again, so a
// checkpoint that changed or vanished while the snapshot was taken is refused, never used. The
// live run's directory is only ever read: no file is written, renamed or locked there.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace ckpt {

struct LiveSnapshot {
  std::string path;  // the snapshot: a file or a directory under the drill's work dir
  uint64_t files = 0, bytes = 0;
  uint64_t linked = 0, copied = 0;
  double seconds = 0;
  // The newest modification time of its files (ns since the epoch): about when the run wrote it.
  int64_t newest_mtime_ns = 0;
};

// Snapshots `source` (a checkpoint file or directory) as `dest_dir`/<its name>. kNotFound when the
// source is gone; kIoError when a file of it changed (size, mtime, inode) or vanished meanwhile.
Result<LiveSnapshot> snapshot_checkpoint(const std::string& source, const std::string& dest_dir);

}  // namespace ckpt
