// A set of disjoint half-open byte ranges [begin, end), merged as they are added: which parts of a
// file's last durable content the durability model has already preserved in its shadow file.
// Sequential writes keep it at one range, so it stays small however large the file.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace ckpt::faultfs {

class ByteRanges {
 public:
  // The parts of [begin, end) not yet in the set, in order.
  std::vector<std::pair<uint64_t, uint64_t>> missing(uint64_t begin, uint64_t end) const {
    std::vector<std::pair<uint64_t, uint64_t>> gaps;
    uint64_t at = begin;
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin()) --it;
    for (; it != ranges_.end() && it->first < end && at < end; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) gaps.emplace_back(at, it->first);
      at = it->second;
    }
    if (at < end) gaps.emplace_back(at, end);
    return gaps;
  }

  void add(uint64_t begin, uint64_t end) {
    if (begin >= end) return;
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= begin) {
        begin = prev->first;
        if (prev->second > end) end = prev->second;
        it = ranges_.erase(prev);
      }
    }
    while (it != ranges_.end() && it->first <= end) {
      if (it->second > end) end = it->second;
      it = ranges_.erase(it);
    }
    ranges_[begin] = end;
  }

  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }
  void clear() { ranges_.clear(); }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end, disjoint and not touching
};

}  // namespace ckpt::faultfs
