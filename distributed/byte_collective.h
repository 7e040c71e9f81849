// What a checkpoint save needs from a group of processes, and no more: who am I, how many are we,
// and an all-gather of bytes (JSON reports). Torch-free, so the one save pipeline in shards/ serves
// every world size: a world of one is SingleProcess, a real group is a ProcessGroup (c10d), which
// implements this on its tensor collectives.
#pragma once

#include <string>
#include <vector>

namespace ckpt {

class ByteCollective {
 public:
  virtual ~ByteCollective() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Every rank passes its bytes; every rank gets all of them, in rank order. Throws (c10d errors)
  // when a peer dies; callers at the top of a rank catch that.
  virtual std::vector<std::string> all_gather_bytes(const std::string& bytes) = 0;
};

// A world of one: every collective is the identity.
class SingleProcess final : public ByteCollective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override { return {bytes}; }
};

}  // namespace ckpt
