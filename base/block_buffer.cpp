#include "base/block_buffer.h"

#include <algorithm>
#include <utility>

namespace ckpt {

namespace {

// Two streams a worker and a spare: more than that per thread is never in use at once.
constexpr size_t kKeptPerThread = 4;

std::vector<std::vector<uint8_t>>& free_list() {
  thread_local std::vector<std::vector<uint8_t>> buffers;
  return buffers;
}

}  // namespace

BlockBuffer::BlockBuffer(size_t bytes) : size_(std::max<size_t>(1, bytes)) {
  auto& buffers = free_list();
  // The largest kept buffer fits most often; a smaller one is grown (only the new tail is zeroed).
  auto best = std::max_element(buffers.begin(), buffers.end(),
                               [](const auto& a, const auto& b) { return a.size() < b.size(); });
  if (best != buffers.end()) {
    bytes_ = std::move(*best);
    buffers.erase(best);
  }
  if (bytes_.size() < size_) bytes_.resize(size_);
}

BlockBuffer::~BlockBuffer() {
  auto& buffers = free_list();
  if (buffers.size() < kKeptPerThread && !bytes_.empty()) buffers.push_back(std::move(bytes_));
}

}  // namespace ckpt
