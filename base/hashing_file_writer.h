// A new file written front to back whose digests are taken while it is being written, so that
// sealing it reads nothing back afterwards: the whole file's SHA-256, each fixed-size piece's, and
// each large write's (a torch.save record's payload arrives as one write: these are its tensors').
//
// Why this shape: ckptcheck.torch.save must cost little more than torch.save + fsync. On the bench
// machine torch.save writes 1 GiB into the page cache in ~0.4 s on one core and fsync then waits
// ~0.6 s for the disk with both cores idle; the seal's hashing (the file, its pieces and its
// tensors: three passes' worth) fits in those idle cores. So writes go straight to the page cache
// as torch.save's own do, a tail thread hashes the file stream (whole + pieces, two streams on one
// core) from the page cache as each write lands, using the core torch.save leaves idle, and finish()
// hashes the large writes on the calling thread while a second thread waits for fsync. Hashing
// the caller's buffer inside write() instead would put the hashing on torch.save's own path (it
// measured 1.8 s against 1.0 s for torch.save + fsync).
//
// Only this writer writes the file (it is created with O_EXCL), so what the tail reads back from
// the page cache is exactly what was written; the seal still checks that the file it seals is this
// one (device, inode, size and modification time) before it takes these digests.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"

namespace ckpt {

// One write's bytes and their SHA-256 (hex).
struct WrittenRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::string sha256;
};

// What a HashingFileWriter wrote and hashed, and which file that is: a seal takes these digests for
// the file only while it is still that file (same device, inode, size and modification time).
struct WrittenFileDigests {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t bytes = 0;
  int64_t modified_ns = 0;
  std::string sha256;
  uint64_t piece_bytes = 0;
  std::vector<std::string> pieces;   // of each consecutive piece_bytes (the last one shorter)
  std::vector<WrittenRange> writes;  // each write of at least kRecordedWriteBytes, in file order
};

class HashingFileWriter {
 public:
  static constexpr uint64_t kRecordedWriteBytes = 64u << 10;  // smaller writes are not tensors worth a digest

  // A new file (never an existing one: O_EXCL) hashed in pieces of `piece_bytes`.
  static Result<std::unique_ptr<HashingFileWriter>> create_exclusive(const std::string& path,
                                                                     uint64_t piece_bytes);
  HashingFileWriter(const HashingFileWriter&) = delete;
  HashingFileWriter& operator=(const HashingFileWriter&) = delete;
  ~HashingFileWriter();  // without finish(): the file is left torn, unsynced

  // The bytes are in the file (the page cache) when it returns; the caller's buffer is not kept.
  Status write(const void* data, size_t size);
  // fsyncs and closes; the digests describe the file as it is now.
  Result<WrittenFileDigests> finish();

 private:
  HashingFileWriter(int fd, std::string path, uint64_t piece_bytes);
  void tail_loop();  // hashes [hashed, written) of the file stream until closed and caught up
  Status hash_recorded_writes();
  void stop_tail();

  int fd_;
  WrittenFileDigests digests_;
  Status failed_ = Status::ok();
  bool finished_ = false;

  std::mutex mu_;
  std::condition_variable grew_;
  uint64_t written_ = 0;  // bytes in the file
  bool closing_ = false;  // no more writes: the tail ends once it has hashed them all
  Status tail_failed_ = Status::ok();
  std::thread tail_;
};

}  // namespace ckpt
