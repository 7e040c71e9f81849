#include "distributed/share_split.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

namespace ckpt {

std::vector<int> split_by_size(const std::vector<uint64_t>& sizes, int tasks) {
  std::vector<int> owners(sizes.size(), 0);
  if (tasks <= 1) return owners;
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  // (bytes so far, rank): the least loaded task on top, the lowest rank among equals.
  using Load = std::pair<uint64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (int t = 0; t < tasks; ++t) loads.push({0, t});
  for (size_t unit : order) {
    Load least = loads.top();
    loads.pop();
    owners[unit] = least.second;
    least.first += sizes[unit];
    loads.push(least);
  }
  return owners;
}

std::vector<uint64_t> share_bytes(const std::vector<uint64_t>& sizes, const std::vector<int>& owners,
                                  int tasks) {
  std::vector<uint64_t> shares(static_cast<size_t>(std::max(tasks, 1)), 0);
  for (size_t i = 0; i < sizes.size(); ++i) shares[static_cast<size_t>(owners[i])] += sizes[i];
  return shares;
}

double share_balance(const std::vector<uint64_t>& shares) {
  if (shares.empty()) return 1.0;
  const uint64_t total = std::accumulate(shares.begin(), shares.end(), uint64_t{0});
  if (total == 0) return 1.0;
  const double mean = static_cast<double>(total) / static_cast<double>(shares.size());
  return static_cast<double>(*std::max_element(shares.begin(), shares.end())) / mean;
}

}  // namespace ckpt
