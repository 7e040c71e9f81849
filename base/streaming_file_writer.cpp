#include "base/streaming_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace ckpt {

namespace {

size_t round_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

Status errno_status(const std::string& path, const std::string& what) {
  return Status::io_error(path + ": " + what + ": " + std::strerror(errno));
}

// The buffers kept while a WriteBufferReuse is alive, by size.
struct KeptBuffers {
  std::mutex mu;
  size_t scopes = 0;
  std::vector<std::pair<size_t, uint8_t*>> free;
};

KeptBuffers& kept() {
  static KeptBuffers* buffers = new KeptBuffers;  // never destroyed: writers may outlive statics
  return *buffers;
}

// More than two writers' worth on a machine of a few cores is never asked for again at once.
constexpr size_t kMaxKeptBuffers = 32;

}  // namespace

WriteBufferReuse::WriteBufferReuse() {
  std::lock_guard<std::mutex> lock(kept().mu);
  ++kept().scopes;
}

WriteBufferReuse::~WriteBufferReuse() {
  std::vector<std::pair<size_t, uint8_t*>> freed;
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    if (--kept().scopes == 0) freed.swap(kept().free);
  }
  for (const auto& [bytes, memory] : freed) std::free(memory);
}

size_t WriteBufferReuse::kept_buffers() {
  std::lock_guard<std::mutex> lock(kept().mu);
  return kept().free.size();
}

void StreamingFileWriter::BufferRelease::operator()(uint8_t* memory) const {
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    if (kept().scopes > 0 && kept().free.size() < kMaxKeptBuffers) {
      kept().free.emplace_back(bytes, memory);
      return;
    }
  }
  std::free(memory);
}

Result<std::unique_ptr<StreamingFileWriter>> StreamingFileWriter::create_exclusive(const std::string& path,
                                                                                   const Options& options) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = -1;
  bool direct = false;
  if (options.allow_direct_io) {
    fd = ::open(path.c_str(), kFlags | O_DIRECT, 0644);
    direct = fd >= 0;
    // EINVAL: the filesystem has no O_DIRECT. Anything else (EEXIST, EACCES) is the real answer.
    if (fd < 0 && errno != EINVAL) return errno_status(path, "cannot create");
  }
  if (fd < 0) fd = ::open(path.c_str(), kFlags, 0644);
  if (fd < 0) return errno_status(path, "cannot create");
  Options normalized = options;
  normalized.buffer_bytes = round_up(std::max<size_t>(options.buffer_bytes, 1), kDirectIoAlignment);
  normalized.buffers_in_flight = std::max<size_t>(options.buffers_in_flight, 1);
  return std::unique_ptr<StreamingFileWriter>(new StreamingFileWriter(fd, path, normalized, direct));
}

StreamingFileWriter::StreamingFileWriter(int fd, std::string path, const Options& options, bool direct)
    : fd_(fd), path_(std::move(path)), options_(options), direct_(direct) {
  io_thread_ = std::thread([this] { io_loop(); });
}

StreamingFileWriter::~StreamingFileWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();
    stopping_ = true;
  }
  changed_.notify_all();
  if (io_thread_.joinable()) io_thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

bool StreamingFileWriter::used_direct_io() const {
  return direct_.load();
}

Result<StreamingFileWriter::Buffer> StreamingFileWriter::allocate_buffer() const {
  const size_t bytes = options_.buffer_bytes;
  Buffer buffer;
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    auto& kept_free = kept().free;
    const auto it =
        std::find_if(kept_free.begin(), kept_free.end(), [&](const auto& b) { return b.first == bytes; });
    if (it != kept_free.end()) {
      buffer.data = std::unique_ptr<uint8_t, BufferRelease>(it->second, BufferRelease{bytes});
      kept_free.erase(it);
      return buffer;
    }
  }
  void* memory = nullptr;
  if (::posix_memalign(&memory, kDirectIoAlignment, bytes) != 0)
    return Status::io_error(path_ + ": cannot allocate a " + std::to_string(bytes) + "-byte write buffer");
  buffer.data = std::unique_ptr<uint8_t, BufferRelease>(static_cast<uint8_t*>(memory), BufferRelease{bytes});
  return buffer;
}

Status StreamingFileWriter::first_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status StreamingFileWriter::take_free_buffer() {
  const bool held = appended_ < options_.held_prefix_bytes;
  Buffer buffer;
  if (held) {
    CKPT_ASSIGN_OR_RETURN(buffer, allocate_buffer());
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] {
      return !free_.empty() || pool_buffers_ <= options_.buffers_in_flight || !error_.is_ok();
    });
    if (!error_.is_ok()) return error_;
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
    } else {
      ++pool_buffers_;
      lock.unlock();
      CKPT_ASSIGN_OR_RETURN(buffer, allocate_buffer());
    }
  }
  buffer.file_offset = appended_;
  buffer.used = 0;
  current_ = std::move(buffer);
  return Status::ok();
}

void StreamingFileWriter::retire_current_buffer() {
  if (is_held(current_)) {
    held_.push_back(std::move(current_));
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(current_));
  }
  changed_.notify_all();
  current_ = Buffer();
}

Status StreamingFileWriter::append(const void* data, size_t size, Sha256* hash) {
  const auto* p = static_cast<const uint8_t*>(data);
  return append_filled(
      size,
      [&p](uint8_t* out, size_t n) {
        if (p) {
          std::memcpy(out, p, n);
          p += n;
        } else {
          std::memset(out, 0, n);
        }
        return Status::ok();
      },
      hash);
}

Status StreamingFileWriter::append_filled(size_t size, const Filler& fill, Sha256* hash) {
  if (finished_) return Status::invalid_argument(path_ + ": append after finish");
  constexpr size_t kHashPiece = 256 << 10;  // filled, then hashed while still in L2
  while (size > 0) {
    if (!current_.data) CKPT_RETURN_IF_ERROR(take_free_buffer());
    size_t n = std::min(size, options_.buffer_bytes - current_.used);
    if (hash) n = std::min(n, kHashPiece);
    uint8_t* out = current_.data.get() + current_.used;
    CKPT_RETURN_IF_ERROR(fill(out, n));
    if (hash) hash->update(out, n);
    current_.used += n;
    appended_ += n;
    size -= n;
    if (current_.used == options_.buffer_bytes) retire_current_buffer();
  }
  return Status::ok();
}

Status StreamingFileWriter::append_zeros(size_t count) {
  return append(nullptr, count);
}

Status StreamingFileWriter::patch_prefix(uint64_t offset, const void* data, size_t size) {
  const uint64_t limit = std::min(options_.held_prefix_bytes, appended_);
  if (offset > limit || size > limit - offset) {
    return Status::invalid_argument(path_ + ": patch of " + std::to_string(size) + " bytes at " +
                                    std::to_string(offset) + " is outside the held prefix of " +
                                    std::to_string(limit) + " bytes");
  }
  const auto* p = static_cast<const uint8_t*>(data);
  auto patch = [&](Buffer& b) {
    const uint64_t begin = std::max(offset, b.file_offset);
    const uint64_t end = std::min<uint64_t>(offset + size, b.file_offset + b.used);
    if (begin < end) std::memcpy(b.data.get() + (begin - b.file_offset), p + (begin - offset), end - begin);
  };
  for (Buffer& b : held_) patch(b);
  if (current_.data) patch(current_);
  return Status::ok();
}

Status StreamingFileWriter::pwrite_all(const uint8_t* data, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(offset + done));
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EINVAL && direct_.load()) {
      // The filesystem opened with O_DIRECT but refuses this transfer: continue buffered.
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags >= 0 && ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) == 0) {
        direct_.store(false);
        continue;
      }
    }
    return errno_status(path_, "write failed at offset " + std::to_string(offset + done));
  }
  // Buffered: start writeback now so fsync has little left to wait for (a hint; fsync reports errors).
  if (!direct_.load())
    ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), SYNC_FILE_RANGE_WRITE);
  return Status::ok();
}

void StreamingFileWriter::io_loop() {
  for (;;) {
    Buffer buffer;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;
      buffer = std::move(queue_.front());
      queue_.pop_front();
      ++in_io_;
    }
    // Full buffers only: their offset and length are multiples of the buffer size, so aligned.
    Status status = pwrite_all(buffer.data.get(), buffer.used, buffer.file_offset);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status.is_ok() && error_.is_ok()) error_ = status;
      buffer.used = 0;
      free_.push_back(std::move(buffer));
      --in_io_;
    }
    changed_.notify_all();
  }
}

Status StreamingFileWriter::write_buffer(Buffer& buffer) {
  size_t length = buffer.used;
  if (direct_.load()) {
    length = round_up(buffer.used, kDirectIoAlignment);  // <= buffer_bytes, itself aligned
    std::memset(buffer.data.get() + buffer.used, 0, length - buffer.used);
  }
  CKPT_RETURN_IF_ERROR(pwrite_all(buffer.data.get(), length, buffer.file_offset));
  padded_end_ = std::max<uint64_t>(padded_end_, buffer.file_offset + length);
  return Status::ok();
}

Status StreamingFileWriter::finish() {
  if (finished_) return Status::invalid_argument(path_ + ": finished twice");
  finished_ = true;
  Buffer tail;
  if (current_.data && current_.used > 0) {
    if (is_held(current_)) {
      held_.push_back(std::move(current_));
    } else {
      tail = std::move(current_);
    }
  }
  current_ = Buffer();
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return (queue_.empty() && in_io_ == 0) || !error_.is_ok(); });
    stopping_ = true;
  }
  changed_.notify_all();
  io_thread_.join();
  CKPT_RETURN_IF_ERROR(first_error());
  // The held prefix goes last: until it is on disk the file has no valid header at all.
  if (tail.data) CKPT_RETURN_IF_ERROR(write_buffer(tail));
  for (Buffer& b : held_) CKPT_RETURN_IF_ERROR(write_buffer(b));
  if (padded_end_ > appended_ && ::ftruncate(fd_, static_cast<off_t>(appended_)) != 0) {
    return errno_status(path_, "cannot trim to " + std::to_string(appended_) + " bytes");
  }
  if (::fsync(fd_) != 0) return errno_status(path_, "fsync failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return errno_status(path_, "close failed");
  return Status::ok();
}

}  // namespace ckpt
