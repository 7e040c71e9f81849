// The resident memory of a running process and all its descendants (a launcher and every rank,
// a Python program and its data-loader workers), sampled from /proc at a fixed interval while it
// runs. It measures a program from outside, with no help from it: a peak that lasts less than one
// interval can be missed, so every figure says it was sampled and at what interval. Linux only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace ckpt {

// Resident bytes (/proc/<pid>/statm) of `root` and every process below it (parents from
// /proc/<pid>/stat); `processes` is set to how many were counted. 0 when `root` is gone.
uint64_t process_tree_rss_bytes(pid_t root, int* processes = nullptr);

struct RssPeak {
  uint64_t peak_bytes = 0;  // the highest sum over the tree of any one sample
  int64_t samples = 0;      // samples taken with at least one process alive
  int max_processes = 0;    // the most processes seen in the tree in one sample
  double interval_seconds = 0;
};

// Samples process_tree_rss_bytes(root) every `interval` on a thread of its own, from construction
// until stop() (or destruction). Invariant: stop() joins the thread, so the peak it returns is final.
class RssSampler {
 public:
  RssSampler(pid_t root, std::chrono::milliseconds interval);
  ~RssSampler();
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  RssPeak stop();
  RssPeak peak_so_far() const;

 private:
  void sample_once();

  pid_t root_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  RssPeak peak_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ckpt
