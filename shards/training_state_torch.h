// The training state a restart needs, as named torch tensors: what a trainer exports and imports
// and what the sharding layer saves and loads. It lives here, below the workload, so that the
// checkpoint code can name it without depending on any trainer. Include only from *_torch.cpp.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ckpt {

// One named tensor of training state. Tensors are contiguous CPU tensors.
struct StateTensor {
  std::string name;       // "model.blocks.0.attn.w_qkv", "optimizer.model.blocks.0.attn.w_qkv.exp_avg"
  std::string component;  // model | optimizer | scheduler | scaler | rng | data | progress
  at::Tensor tensor;
  // Empty: `tensor` is the whole global tensor. Otherwise `tensor` is the box of a global tensor of
  // shape `global_shape` starting at `offsets` (FSDP: the rows this rank owns).
  std::vector<int64_t> offsets = {};
  std::vector<int64_t> global_shape = {};
};
using TrainingState = std::vector<StateTensor>;

}  // namespace ckpt
