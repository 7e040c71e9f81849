// Hashing several streams on one core, two at a time.
//
// A caller that feeds more than one hasher per block (verify's scan of two units; a payload's hash
// beside the whole file's) queues the pieces with add() and calls run(): each hasher still gets its
// pieces in the order they were added, and the blocks of two different hashers are compressed
// together (sha256_update_two), so the CPU's SHA units overlap the two streams' latencies.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "base/parallel_jobs.h"
#include "base/sha256.h"
#include "base/status.h"

namespace ckpt {

class Sha256Batch {
 public:
  Sha256Batch() = default;
  // Queued hashers record which batch holds them: a copy would hold them too, unrecorded.
  Sha256Batch(const Sha256Batch&) = delete;
  Sha256Batch& operator=(const Sha256Batch&) = delete;
  // A batch destroyed with pieces still queued leaves their hashers refusing any further update
  // or finish (std::logic_error): they miss those bytes, and a digest without them would be wrong.
  ~Sha256Batch();

  // Queues `size` bytes at `data` for `hasher`; both must stay valid until run() (the hasher: or
  // until the batch is destroyed). From its first add until this batch runs, the hasher belongs to
  // this batch: adding it to another batch throws std::logic_error and queues nothing, since
  // whichever batch ran first would hash its bytes first, whatever order they were added in.
  void add(Sha256& hasher, const void* data, size_t size);
  // Hashes every queued piece, then forgets them; the hashers are free for any batch again.
  void run();

 private:
  static constexpr uint32_t kNoPiece = UINT32_MAX;
  // Queued bytes; `next` links the pieces of one hasher in the order they were added.
  struct Piece {
    const uint8_t* data;
    size_t size;
    uint32_t next;
  };
  // One hasher's pieces: the one being hashed (kNoPiece: none left), how far into it, the last.
  struct Lane {
    Sha256* hasher;
    uint32_t current;
    uint32_t last;
    size_t done;
  };
  Piece rest(const Lane& lane) const;
  void consume(Lane& lane, size_t n);

  // Flat and reused across rounds: a block holding thousands of small payloads costs no allocation
  // per payload, and finding a hasher's lane is one lookup (Sha256::batch_lane_).
  std::vector<Piece> pieces_;
  std::vector<Lane> lanes_;
};

// Whether a job of `bytes` should hash alone on its core. Paired, each of two streams runs at
// ~0.75 of one stream alone (1.5x the core's throughput, shared), so a job larger than ~2/3 of a
// worker's fair share, which sets the end of the whole run (one huge payload on many cores), is
// faster alone while the other workers pair the rest.
inline bool hashes_alone(uint64_t bytes, uint64_t total_bytes, size_t workers) {
  return static_cast<double>(bytes) * 1.5 * static_cast<double>(workers) > static_cast<double>(total_bytes);
}

// Runs hashing streams on the calling thread two at a time: each round, each live stream reads one
// block and queues its hashing in one batch, the batch runs (the two streams' blocks side by
// side), then each stream settles. `next` hands out the next stream, opened (nullptr: none left).
// A Stream has:
//   Status read(Sha256Batch&)  the next block, queued; an error ends the stream
//   bool at_end() const        every block was read
//   void settle()              after the batch ran: digests of whatever ended in the block
//   Status finish()            once at_end and settled: the stream's own final checks
//   void conclude(Status)      its outcome: a read error, or what finish() returned
//   bool alone() const         no second stream is taken while it runs (hashes_alone)
template <typename Stream>
void run_two_streams_at_a_time(const std::function<std::unique_ptr<Stream>()>& next) {
  struct Slot {
    std::unique_ptr<Stream> stream;
    Status failed = Status::ok();
  };
  Slot slots[2];
  bool more = true;
  Sha256Batch batch;
  for (;;) {
    for (Slot& slot : slots) {
      const Slot& other = &slot == &slots[0] ? slots[1] : slots[0];
      if (more && !slot.stream && !(other.stream && other.stream->alone()))
        more = (slot.stream = next()) != nullptr;
    }
    if (!slots[0].stream && !slots[1].stream) return;
    for (Slot& slot : slots) {
      if (slot.stream && !slot.stream->at_end()) slot.failed = slot.stream->read(batch);
    }
    batch.run();  // before any stream ends: the batch points into their buffers and hashers
    for (Slot& slot : slots) {
      if (!slot.stream) continue;
      if (!slot.failed.is_ok()) {
        slot.stream->conclude(std::move(slot.failed));
      } else {
        slot.stream->settle();
        if (!slot.stream->at_end()) continue;
        slot.stream->conclude(slot.stream->finish());
      }
      slot.stream.reset();
      slot.failed = Status::ok();
    }
  }
}

// A job as run_hashing_workers hands it out: its index, and whether it hashes alone.
struct QueuedJob {
  size_t index;
  bool alone;
};
using NextQueuedJob = std::function<std::optional<QueuedJob>()>;

// Jobs of `sizes` bytes drained by one worker per core (or `threads`, never more than there are
// jobs), each running work(next) with two streams at a time (run_two_streams_at_a_time). next()
// hands out the largest first, so the jobs that set the end start first, each marked alone when
// hashes_alone says so; nullopt when none is left. `report` as in run_parallel_reporting.
template <typename Work>
void run_hashing_workers(const std::vector<uint64_t>& sizes, size_t threads, const Work& work,
                         const std::function<void()>& report) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  const size_t workers = resolve_jobs(threads, sizes.size());
  std::atomic<size_t> next{0};
  const NextQueuedJob next_job = [&]() -> std::optional<QueuedJob> {
    const size_t n = next.fetch_add(1);
    if (n >= order.size()) return std::nullopt;
    return QueuedJob{order[n], hashes_alone(sizes[order[n]], total, workers)};
  };
  run_parallel_reporting(
      workers, workers, [&](size_t) { work(next_job); }, report);
}

// run_hashing_workers over a list of tasks that each carry an `alone` flag: every worker runs
// run_two(next), where next() hands out a copy of the next task (largest first, by size_of(task))
// with `alone` set as run_hashing_workers says, nullopt when none is left. How seal and verify hash
// ranges (sha256_ranges_on_workers) and scan shard units (scan_units_in_parallel).
template <typename Task, typename SizeOf, typename RunTwo>
void run_tasks_on_hashing_workers(const std::vector<Task>& tasks, size_t threads, const SizeOf& size_of,
                                  const RunTwo& run_two, const std::function<void()>& report) {
  std::vector<uint64_t> sizes;
  sizes.reserve(tasks.size());
  for (const Task& task : tasks) sizes.push_back(size_of(task));
  run_hashing_workers(
      sizes, threads,
      [&](const NextQueuedJob& next) {
        run_two([&]() -> std::optional<Task> {
          const std::optional<QueuedJob> job = next();
          if (!job) return std::nullopt;
          Task task = tasks[job->index];
          task.alone = job->alone;
          return task;
        });
      },
      report);
}

}  // namespace ckpt
