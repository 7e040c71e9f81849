#include "base/hashing_file_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/block_buffer.h"
#include "base/byte_source.h"
#include "base/file_stamp.h"
#include "base/sha256_ranges.h"

namespace ckpt {

namespace {

Status tail_error(const std::string& path, const std::string& what) {
  return Status::io_error(path + ": " + what + ": " + std::strerror(errno));
}

constexpr auto kPollInterval = std::chrono::milliseconds(1);  // while the writer is ahead of nothing

}  // namespace

bool WrittenFileDigests::describes(const struct stat& st) const {
  return device == st.st_dev && inode == st.st_ino && bytes == static_cast<uint64_t>(st.st_size) &&
         modified_ns == nanoseconds_of(st.st_mtim);
}

Result<std::unique_ptr<HashingFileTail>> HashingFileTail::create_exclusive(const std::string& path,
                                                                           uint64_t piece_bytes) {
  if (piece_bytes == 0) return Status::invalid_argument(path + ": piece size 0");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return tail_error(path, "cannot create");
  return std::unique_ptr<HashingFileTail>(new HashingFileTail(fd, path, piece_bytes));
}

HashingFileTail::HashingFileTail(int fd, std::string path, uint64_t piece_bytes) : fd_(fd) {
  digests_.path = std::move(path);
  digests_.piece_bytes = piece_bytes;
  tail_ = std::thread([this] { tail_loop(); });
}

HashingFileTail::~HashingFileTail() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) tail_failed_ = Status::io_error(digests_.path + ": abandoned before finish");
    closing_ = true;
    final_bytes_ = 0;  // stop wherever the tail is
  }
  changed_.notify_all();
  if (tail_.joinable()) tail_.join();
  if (fd_ >= 0) ::close(fd_);
}

void HashingFileTail::tail_loop() {
  BlockBuffer buffer(4u << 20);
  Sha256 whole;
  auto piece = std::make_unique<Sha256>();
  uint64_t piece_filled = 0;
  uint64_t hashed = 0;
  for (;;) {
    uint64_t end;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!tail_failed_.is_ok()) return;
      if (closing_) {
        if (hashed >= final_bytes_) break;
        end = final_bytes_;
      } else {
        lock.unlock();
        struct stat st {};
        if (::fstat(fd_, &st) != 0) {
          lock.lock();
          tail_failed_ = tail_error(digests_.path, "cannot stat while hashing");
          return;
        }
        end = static_cast<uint64_t>(st.st_size);
        lock.lock();
        if (end <= hashed) {
          changed_.wait_for(lock, kPollInterval);
          continue;
        }
      }
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - hashed));
    const ssize_t got = ::pread(fd_, buffer.data(), n, static_cast<off_t>(hashed));
    if (got == 0) {
      // On FUSE, fstat asks the daemon, which has the writer's last write, while read stops at the
      // kernel's own idea of the size, which that write's reply has not raised yet: nothing to read
      // is "not yet" while the writer writes (ckptcheck.torch.save through ckptcheck-faultfs failed
      // here one save in a few). Once finish() has the final size, the writer is done and the
      // kernel's size with it: one more try, then the file did shrink.
      std::unique_lock<std::mutex> lock(mu_);
      if (!closing_ || !empty_read_after_close_) {
        empty_read_after_close_ = closing_;
        if (!closing_) changed_.wait_for(lock, kPollInterval);
        continue;
      }
    }
    if (got <= 0) {
      std::lock_guard<std::mutex> lock(mu_);
      tail_failed_ = got < 0 ? tail_error(digests_.path, "cannot read what was written")
                             : Status::io_error(digests_.path + ": shrank while it was written");
      return;
    }
    for (size_t done = 0; done < static_cast<size_t>(got);) {
      const size_t k = static_cast<size_t>(
          std::min<uint64_t>(static_cast<uint64_t>(got) - done, digests_.piece_bytes - piece_filled));
      sha256_update_two(whole, buffer.data() + done, k, *piece, buffer.data() + done, k);
      done += k;
      piece_filled += k;
      if (piece_filled == digests_.piece_bytes) {
        digests_.pieces.push_back(piece->finish_hex());
        piece = std::make_unique<Sha256>();
        piece_filled = 0;
      }
    }
    hashed += static_cast<uint64_t>(got);
  }
  if (piece_filled > 0 || digests_.pieces.empty()) digests_.pieces.push_back(piece->finish_hex());
  digests_.sha256 = whole.finish_hex();
}

// Each named range, read back from the page cache, two at a time on this thread.
Status HashingFileTail::hash_ranges(std::vector<WrittenRange>& ranges) {
  if (ranges.empty()) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(digests_.path));
  std::vector<Result<std::string>> digests(ranges.size(), Status::io_error("not hashed"));
  std::vector<RangeToHash> to_hash;
  for (size_t i = 0; i < ranges.size(); ++i)
    to_hash.push_back({source.get(), ranges[i].offset, ranges[i].bytes, &digests[i]});
  sha256_ranges_on_workers(to_hash, /*threads=*/1);  // the other core is the tail's
  for (size_t i = 0; i < digests.size(); ++i) {
    if (!digests[i].is_ok()) return digests[i].status();
    ranges[i].sha256 = *digests[i];
  }
  return Status::ok();
}

Result<WrittenFileDigests> HashingFileTail::finish(std::vector<WrittenRange> ranges) {
  if (finished_) return Status::invalid_argument(digests_.path + ": finish called twice");
  finished_ = true;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return tail_error(digests_.path, "cannot stat after writing");
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    final_bytes_ = static_cast<uint64_t>(st.st_size);
  }
  changed_.notify_all();
  // fsync waits for the disk with the cores idle: the tail and the ranges are hashed meanwhile.
  Status synced = Status::ok();
  std::thread syncing([&] {
    if (::fsync(fd_) != 0) synced = tail_error(digests_.path, "cannot fsync");
  });
  std::sort(ranges.begin(), ranges.end(),
            [](const WrittenRange& a, const WrittenRange& b) { return a.offset < b.offset; });
  Status hashed = hash_ranges(ranges);
  tail_.join();
  syncing.join();
  CKPT_RETURN_IF_ERROR(synced);
  CKPT_RETURN_IF_ERROR(hashed);
  CKPT_RETURN_IF_ERROR(tail_failed_);
  struct stat after {};
  if (::fstat(fd_, &after) != 0) return tail_error(digests_.path, "cannot stat after writing");
  if (after.st_size != st.st_size) {
    return Status::io_error(digests_.path + ": still being written (" + std::to_string(st.st_size) +
                            " then " + std::to_string(after.st_size) + " bytes)");
  }
  digests_.ranges = std::move(ranges);
  digests_.bytes = static_cast<uint64_t>(after.st_size);
  digests_.device = after.st_dev;
  digests_.inode = after.st_ino;
  digests_.modified_ns = nanoseconds_of(after.st_mtim);
  return digests_;
}

}  // namespace ckpt
