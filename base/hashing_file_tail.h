// Digests of a file taken while another writer fills it front to back, so that sealing it reads
// nothing back afterwards: the whole file's SHA-256, each fixed-size piece's, and each byte range
// named at the end (a torch.save file's tensor records).
//
// Why this shape: ckptcheck.torch.save must cost little more than torch.save + fsync. On the bench
// machine torch.save writes 1 GiB into the page cache in ~0.4 s on one core, and fsync then waits
// ~0.6 s for the disk with both cores idle; the seal's hashing (the file, its pieces and its
// tensors: three passes' worth) fits in those idle cores. So torch.save writes by name, through its
// own stream (a Python file object would cost it a copy of every byte), a tail thread hashes the
// file stream (whole + pieces, two streams on one core) from the page cache as it grows, on the core
// torch.save leaves idle, and finish() hashes the named ranges on the calling thread while a second
// thread waits for fsync. Hashing inside a write() instead put the hashing on torch.save's own
// path (1.8 s against 1.0 s for torch.save + fsync).
//
// The tail is sound only for a writer that never goes back: torch's zip writer refuses to (it
// throws on any write that is not at the current end). The file is created here, empty and new
// (O_EXCL), and the writer opens it by name; the seal checks that the file it seals is this one
// (device, inode, size and modification time) before it takes these digests.
#pragma once

#include <sys/stat.h>
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

// A byte range of the file and its SHA-256 (hex).
struct WrittenRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::string sha256;
};

// What a HashingFileTail hashed, and which file that is: a seal takes these digests for the file
// only while it is still that file (same device, inode, size and modification time).
struct WrittenFileDigests {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t bytes = 0;
  int64_t modified_ns = 0;
  std::string sha256;
  uint64_t piece_bytes = 0;
  std::vector<std::string> pieces;   // of each consecutive piece_bytes (the last one shorter)
  std::vector<WrittenRange> ranges;  // the ranges finish() was given, in file order

  // Whether `st` (fstat of a file about to be sealed) is the file these digests were taken of,
  // unchanged since finish().
  bool describes(const struct stat& st) const;
};

class HashingFileTail {
 public:
  // Creates `path` (never an existing file: O_EXCL) for a writer to fill, hashed in pieces of
  // `piece_bytes` as it grows.
  static Result<std::unique_ptr<HashingFileTail>> create_exclusive(const std::string& path,
                                                                   uint64_t piece_bytes);
  HashingFileTail(const HashingFileTail&) = delete;
  HashingFileTail& operator=(const HashingFileTail&) = delete;
  ~HashingFileTail();

  // Once the writer has closed the file: fsyncs it while the tail catches up and `ranges` (offset,
  // bytes) are hashed; the digests describe the file as it is now.
  Result<WrittenFileDigests> finish(std::vector<WrittenRange> ranges);

 private:
  HashingFileTail(int fd, std::string path, uint64_t piece_bytes);
  void tail_loop();  // hashes the file as it grows, until told its final size and caught up
  Status hash_ranges(std::vector<WrittenRange>& ranges);

  int fd_;
  WrittenFileDigests digests_;
  bool finished_ = false;

  std::mutex mu_;
  std::condition_variable changed_;
  bool closing_ = false;
  uint64_t final_bytes_ = 0;             // once closing_
  bool empty_read_after_close_ = false;  // the tail's: a read found nothing once closing_ (tail_loop)
  Status tail_failed_ = Status::ok();
  std::thread tail_;
};

}  // namespace ckpt
