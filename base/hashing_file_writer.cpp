#include "base/hashing_file_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/block_buffer.h"
#include "base/byte_source.h"
#include "base/sha256_ranges.h"

namespace ckpt {

namespace {

Status write_error(const std::string& path, const std::string& what) {
  return Status::io_error(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<HashingFileWriter>> HashingFileWriter::create_exclusive(const std::string& path,
                                                                               uint64_t piece_bytes) {
  if (piece_bytes == 0) return Status::invalid_argument(path + ": piece size 0");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return write_error(path, "cannot create");
  return std::unique_ptr<HashingFileWriter>(new HashingFileWriter(fd, path, piece_bytes));
}

HashingFileWriter::HashingFileWriter(int fd, std::string path, uint64_t piece_bytes) : fd_(fd) {
  digests_.path = std::move(path);
  digests_.piece_bytes = piece_bytes;
  tail_ = std::thread([this] { tail_loop(); });
}

HashingFileWriter::~HashingFileWriter() {
  stop_tail();
  if (fd_ >= 0) ::close(fd_);
}

void HashingFileWriter::stop_tail() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  grew_.notify_all();
  if (tail_.joinable()) tail_.join();
}

void HashingFileWriter::tail_loop() {
  BlockBuffer buffer(4u << 20);
  Sha256 whole;
  auto piece = std::make_unique<Sha256>();
  uint64_t piece_filled = 0;
  uint64_t hashed = 0;
  for (;;) {
    uint64_t written;
    {
      std::unique_lock<std::mutex> lock(mu_);
      grew_.wait(lock, [&] { return closing_ || written_ > hashed; });
      written = written_;
      if (written == hashed) break;  // closing and caught up
    }
    while (hashed < written) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), written - hashed));
      const ssize_t got = ::pread(fd_, buffer.data(), n, static_cast<off_t>(hashed));
      if (got <= 0) {
        std::lock_guard<std::mutex> lock(mu_);
        tail_failed_ = got < 0 ? write_error(digests_.path, "cannot read back what was written")
                               : Status::io_error(digests_.path + ": shorter than what was written");
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
  }
  if (piece_filled > 0 || digests_.pieces.empty()) digests_.pieces.push_back(piece->finish_hex());
  digests_.sha256 = whole.finish_hex();
}

Status HashingFileWriter::write(const void* data, size_t size) {
  if (finished_) return Status::invalid_argument(digests_.path + ": write after finish");
  CKPT_RETURN_IF_ERROR(failed_);
  const uint64_t offset = written_;  // only this thread changes it
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t left = size; left > 0;) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed_ = write_error(digests_.path, "cannot write");
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (size >= kRecordedWriteBytes) digests_.writes.push_back({offset, size, ""});
  {
    std::lock_guard<std::mutex> lock(mu_);
    written_ += size;
  }
  grew_.notify_all();
  return Status::ok();
}

// Each large write, by reading it back from the page cache, two at a time on this thread.
Status HashingFileWriter::hash_recorded_writes() {
  if (digests_.writes.empty()) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(digests_.path));
  std::vector<Result<std::string>> digests(digests_.writes.size(), Status::io_error("not hashed"));
  size_t next = 0;
  sha256_ranges_two_at_a_time([&]() -> std::optional<RangeToHash> {
    if (next == digests_.writes.size()) return std::nullopt;
    const WrittenRange& w = digests_.writes[next];
    RangeToHash range{source.get(), w.offset, w.bytes, &digests[next]};
    ++next;
    return range;
  });
  for (size_t i = 0; i < digests.size(); ++i) {
    if (!digests[i].is_ok()) return digests[i].status();
    digests_.writes[i].sha256 = *digests[i];
  }
  return Status::ok();
}

Result<WrittenFileDigests> HashingFileWriter::finish() {
  if (finished_) return Status::invalid_argument(digests_.path + ": finish called twice");
  finished_ = true;
  CKPT_RETURN_IF_ERROR(failed_);
  // fsync waits for the disk with the cores idle: the tail and the large writes are hashed meanwhile.
  Status synced = Status::ok();
  std::thread syncing([&] {
    if (::fsync(fd_) != 0) synced = write_error(digests_.path, "cannot fsync");
  });
  Status recorded = hash_recorded_writes();
  stop_tail();
  syncing.join();
  CKPT_RETURN_IF_ERROR(synced);
  CKPT_RETURN_IF_ERROR(recorded);
  CKPT_RETURN_IF_ERROR(tail_failed_);
  digests_.bytes = written_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return write_error(digests_.path, "cannot stat after writing");
  if (static_cast<uint64_t>(st.st_size) != written_) {
    return Status::io_error(digests_.path + ": " + std::to_string(st.st_size) + " bytes on disk after writing " +
                            std::to_string(written_));
  }
  digests_.device = st.st_dev;
  digests_.inode = st.st_ino;
  digests_.modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  ::close(fd_);
  fd_ = -1;
  return digests_;
}

}  // namespace ckpt
