// Ranks as threads of one process: the same all-gather contract c10d and MPI give real ranks
// (distributed/byte_collective.h), so code that runs on many ranks is tested for a world of N
// without LibTorch or mpirun.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/byte_collective.h"

namespace ckpt::testing {

class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }

  // Waits until every rank has deposited its bytes, then hands each all of them, in rank order.
  std::vector<std::string> all_gather(int rank, const std::string& bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t round = round_;
    slots_[static_cast<size_t>(rank)] = bytes;
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

  // One rank of the world, as the code under test sees it.
  class Rank final : public ByteCollective {
   public:
    Rank(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
    int rank() const override { return rank_; }
    int world_size() const override { return world_.size(); }
    std::vector<std::string> all_gather_bytes(const std::string& bytes) override {
      return world_.all_gather(rank_, bytes);
    }

   private:
    ThreadWorld& world_;
    int rank_;
  };

 private:
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> slots_, result_;
  int arrived_ = 0;
  uint64_t round_ = 0;
};

}  // namespace ckpt::testing
