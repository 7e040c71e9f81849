// Writes a new file front to back through a few aligned buffers that a background thread writes
// out while the caller fills the next one, so hashing and copying overlap the disk.
//
// Why not DurableFile: a buffered write() copies every byte into the page cache and fsync then
// waits for all of them at the end; on a 2-core machine that copy and the kernel's writeback
// compete with SHA-256 for the same cores. Here the bytes go from the buffer to the disk with
// O_DIRECT where the filesystem takes it, and the disk works while the caller hashes the next
// piece. Where O_DIRECT is refused (tmpfs, some network filesystems, odd alignment) it falls back
// to buffered writes and starts each buffer's writeback at once (sync_file_range), so the final
// fsync has little left to wait for. Either way finish() returns only after fsync.
//
// Headers that depend on the payload (a native shard's header holds every payload's SHA-256) are
// written last: the first `held_prefix_bytes` stay in memory until finish(), and patch_prefix()
// fills them in. Nothing is ever written to an existing file (O_EXCL).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"

namespace ckpt {

constexpr size_t kDirectIoAlignment = 4096;  // file offset, length and memory alignment for O_DIRECT

// While one is alive (a save writing its files), the write buffers a finished writer lets go of
// are kept for the next writer instead of going back to the system: on this VM a fresh 8 MiB buffer
// is 2,048 page faults, and a save of 16 files took some 64 of them (a fifth of `convert`'s time at
// 320k chunks, issue 44). When the last one ends, the kept buffers are freed, so nothing is held
// between saves: a training process's memory between checkpoints is as it was. Saves on several
// threads at once (ranks in one process) share them.
class WriteBufferReuse {
 public:
  WriteBufferReuse();
  ~WriteBufferReuse();
  WriteBufferReuse(const WriteBufferReuse&) = delete;
  WriteBufferReuse& operator=(const WriteBufferReuse&) = delete;
  // Buffers kept now, for the tests.
  static size_t kept_buffers();
};

class StreamingFileWriter {
 public:
  struct Options {
    size_t buffer_bytes = 8u << 20;  // rounded up to kDirectIoAlignment
    size_t buffers_in_flight = 2;    // filled buffers the I/O thread may hold while the caller fills one
    uint64_t held_prefix_bytes = 0;  // kept in memory until finish(), editable with patch_prefix()
    bool allow_direct_io = true;
  };

  static Result<std::unique_ptr<StreamingFileWriter>> create_exclusive(const std::string& path,
                                                                       const Options& options);
  StreamingFileWriter(const StreamingFileWriter&) = delete;
  StreamingFileWriter& operator=(const StreamingFileWriter&) = delete;
  // Without finish(): stops the I/O thread and closes the file unsynced (a torn file, which the
  // commit protocol leaves uncommitted).
  ~StreamingFileWriter();

  // With `hash`, the bytes are also fed to it, from the buffer right after the copy: hashing from
  // cache instead of from DRAM costs a third less CPU on the bench machine (bench/README.md).
  Status append(const void* data, size_t size, Sha256* hash = nullptr);
  // Appends `size` bytes that `fill` writes straight into the writer's buffers, a piece at a time
  // (fill(out, n) must write all n bytes at out): a payload read from another file goes from the
  // read into the buffer the disk is written from, with no copy of its own. A failed fill is
  // returned as it is, and the file is left torn (never finished).
  using Filler = std::function<Status(uint8_t* out, size_t n)>;
  Status append_filled(size_t size, const Filler& fill, Sha256* hash = nullptr);
  Status append_zeros(size_t count);
  // Overwrites bytes already appended inside the held prefix.
  Status patch_prefix(uint64_t offset, const void* data, size_t size);
  // Writes the held prefix and the tail, trims any O_DIRECT padding, fsyncs and closes.
  Status finish();

  uint64_t bytes_appended() const { return appended_; }
  const std::string& path() const { return path_; }
  // Whether every write so far went through O_DIRECT (false after a fallback).
  bool used_direct_io() const;

 private:
  // Gives a buffer back: kept for the next writer while a WriteBufferReuse is alive, freed otherwise.
  struct BufferRelease {
    size_t bytes;  // no default member initializer: a nested class's would not be usable here
    void operator()(uint8_t* memory) const;
  };
  struct Buffer {
    std::unique_ptr<uint8_t, BufferRelease> data;
    uint64_t file_offset = 0;
    size_t used = 0;
  };

  StreamingFileWriter(int fd, std::string path, const Options& options, bool direct);
  Result<Buffer> allocate_buffer() const;
  Status take_free_buffer();     // makes current_ an empty buffer at the next file offset
  void retire_current_buffer();  // held, or queued for the I/O thread
  bool is_held(const Buffer& b) const { return b.file_offset < options_.held_prefix_bytes; }
  Status write_buffer(Buffer& buffer);  // on the calling thread; pads for O_DIRECT
  Status pwrite_all(const uint8_t* data, size_t size, uint64_t offset);
  void io_loop();
  Status first_error();

  int fd_ = -1;
  std::string path_;
  Options options_;
  uint64_t appended_ = 0;
  uint64_t padded_end_ = 0;  // furthest byte written including O_DIRECT padding
  bool finished_ = false;

  Buffer current_;
  std::vector<Buffer> held_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Buffer> queue_;  // filled, waiting for the I/O thread
  std::vector<Buffer> free_;
  size_t in_io_ = 0;         // popped by the I/O thread, not yet returned
  size_t pool_buffers_ = 0;  // allocated for streaming (held ones not counted)
  bool stopping_ = false;
  std::atomic<bool> direct_{false};
  Status error_ = Status::ok();
  std::thread io_thread_;
};

}  // namespace ckpt
