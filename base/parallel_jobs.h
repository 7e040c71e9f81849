// Runs independent jobs on a few threads: verify's shard checks and the loader's chunk hashing
// (shards/mapped_checkpoint.cpp); the shard writer sizes its batches with resolve_jobs.
// Lock-free: jobs write only their own results.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "base/status.h"

namespace ckpt {

// `requested` threads (0: one per core), never more than there are jobs, at least one.
inline size_t resolve_jobs(size_t requested, size_t count) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(1, std::min(requested ? requested : cores, count));
}

// Calls job(i) once for every i in [0, count), from up to `threads` threads, and returns when all
// are done. Jobs are handed out in index order, so early indices start first.
template <typename Job>
void run_parallel(size_t count, size_t threads, const Job& job) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) job(i);
  };
  threads = std::min(threads, count);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();  // the calling thread is one of them
  for (auto& t : pool) t.join();
}

// fn(i) -> Result<T> for every i in [0, count), one thread per core: the values in index order, or
// the first failure in index order, whichever thread met it first (so a report names the same
// shard or tensor however the threads ran). How a checkpoint's shard headers are opened and its
// tensors read and diffed: 16 headers or 20,000 tensors are independent (issue 44).
template <typename T, typename Fn>
Result<std::vector<T>> collect_parallel(size_t count, const Fn& fn) {
  std::vector<std::optional<Result<T>>> results(count);
  run_parallel(count, resolve_jobs(0, count), [&](size_t i) { results[i].emplace(fn(i)); });
  std::vector<T> out;
  out.reserve(count);
  for (auto& r : results) {
    if (!r->is_ok()) return r->status();
    out.push_back(std::move(**r));
  }
  return out;
}

// run_parallel on worker threads while the calling thread calls `report()` every `interval` until
// every job is done, and once more at the end: how verify and seal show bytes hashed on a terminal.
// With an empty `report` it is run_parallel.
template <typename Job>
void run_parallel_reporting(size_t count, size_t threads, const Job& job, const std::function<void()>& report,
                            std::chrono::milliseconds interval = std::chrono::milliseconds(100)) {
  if (!report) {
    run_parallel(count, threads, job);
    return;
  }
  std::atomic<size_t> finished{0};
  std::thread workers([&] {
    run_parallel(count, threads, [&](size_t i) {
      job(i);
      finished.fetch_add(1);
    });
  });
  while (finished.load() < count) {
    report();
    std::this_thread::sleep_for(interval);
  }
  workers.join();
  report();
}

}  // namespace ckpt
