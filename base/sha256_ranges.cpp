#include "base/sha256_ranges.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "base/block_buffer.h"
#include "base/sha256.h"
#include "base/sha256_batch.h"

namespace ckpt {

namespace {

class RangeStream {
 public:
  RangeStream(const RangeToHash& range, std::atomic<uint64_t>* hashed)
      : range_(range), hashed_(hashed), at_(range.offset), buffer_(kStreamBlockBytes) {}

  Status read(Sha256Batch& batch) {
    const uint64_t end = range_.offset + range_.length;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer_.size(), end - at_));
    CKPT_RETURN_IF_ERROR(range_.source->read_at(at_, buffer_.data(), n));
    batch.add(hash_, buffer_.data(), n);
    at_ += n;
    if (hashed_) hashed_->fetch_add(n, std::memory_order_relaxed);
    return Status::ok();
  }
  bool at_end() const { return at_ == range_.offset + range_.length; }
  bool alone() const { return range_.alone; }
  void settle() {}
  Status finish() { return Status::ok(); }
  void conclude(Status status) {
    if (status.is_ok()) {
      *range_.digest = hash_.finish_hex();
    } else {
      *range_.digest = std::move(status);
    }
  }

 private:
  RangeToHash range_;
  std::atomic<uint64_t>* hashed_;
  uint64_t at_;
  BlockBuffer buffer_;
  Sha256 hash_;
};

}  // namespace

void sha256_ranges_two_at_a_time(const std::function<std::optional<RangeToHash>()>& next,
                                 std::atomic<uint64_t>* hashed) {
  run_two_streams_at_a_time<RangeStream>([&]() -> std::unique_ptr<RangeStream> {
    for (std::optional<RangeToHash> range; (range = next());) {
      // A range past the end fails before any read, named as read_at names it.
      Status in_file = check_range(*range->source, range->offset, range->length);
      if (in_file.is_ok()) return std::make_unique<RangeStream>(*range, hashed);
      *range->digest = std::move(in_file);
    }
    return nullptr;
  });
}

void sha256_ranges_on_workers(const std::vector<RangeToHash>& ranges, size_t threads,
                              std::atomic<uint64_t>* hashed, const std::function<void()>& report) {
  run_tasks_on_hashing_workers(
      ranges, threads, [](const RangeToHash& range) { return range.length; },
      [&](const std::function<std::optional<RangeToHash>()>& next) {
        sha256_ranges_two_at_a_time(next, hashed);
      },
      report);
}

}  // namespace ckpt
