// The collectives distributed training needs, on torch.distributed's c10d (Gloo on CPU; NCCL when
// built with CUDA and c10d's NCCL header is available). Everything c10d lives in
// process_group_torch.cpp, so only that one file pays c10d's compile time.
// A world of one needs no c10d at all: every collective is the identity.
// Collectives throw (c10::Error / std::runtime_error) when a peer dies: the train command catches
// that at its top and exits non-zero, which makes the launcher stop the other ranks.
// Include only from *_torch.cpp.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"
#include "distributed/rank_env.h"

namespace ckpt {

class ProcessGroup : public ByteCollective {
 public:
  // Rendezvous through a c10d TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it).
  static Result<std::shared_ptr<ProcessGroup>> connect(const RankEnv& env, double timeout_seconds = 60);
  static std::shared_ptr<ProcessGroup> single();  // world of one, no transport

  // In place, summed over ranks.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  // Every rank passes a tensor of the same shape and dtype; returns one per rank, in rank order.
  virtual std::vector<at::Tensor> all_gather(const at::Tensor& tensor) = 0;
  // Any bytes (JSON manifests pieces): all-gathers the lengths, then the zero-padded bytes.
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override;
  virtual void barrier() = 0;
  // Wall time spent inside collectives so far (all-reduce, all-gather, barrier).
  double communication_seconds() const { return communication_seconds_; }

 protected:
  double communication_seconds_ = 0;
};

// CUDA devices this process can see (0 on a CPU build): one rank per device, by LOCAL_RANK.
int visible_accelerators();

}  // namespace ckpt
