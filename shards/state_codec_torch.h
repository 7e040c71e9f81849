// TrainingState (torch tensors) <-> the torch-free TensorView / LoadedTensor of the sharding
// layer. Include only from *_torch.cpp files.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "shards/checkpoint_writer.h"
#include "shards/tensor_view.h"
#include "shards/training_state_torch.h"

namespace ckpt {

Result<DType> dtype_of(const at::Tensor& tensor);
at::ScalarType scalar_type_of(DType dtype);

// Views into the state's tensors (which must be contiguous CPU tensors and outlive the views).
Result<std::vector<TensorView>> views_of_state(const TrainingState& state);

// The state split for write_checkpoint: in a world larger than one, FSDP row boxes (offsets set)
// and per-rank RNG streams ("rng.*") are this rank's alone; everything else is replicated. In a
// world of one every tensor is replicated, so the plan spreads them all.
struct StateViews {
  std::vector<TensorView> replicated;
  std::vector<RankTensor> rank_tensors;
};
Result<StateViews> save_views_of_state(const TrainingState& state, int world_size);

// Copies viewed bytes (a mapped checkpoint's tensors) into new CPU tensors that outlive the views.
// A file that shrinks under its mapping meanwhile is an I/O error naming it, not a SIGBUS.
Result<std::map<std::string, at::Tensor>> tensors_from_views(const std::vector<TensorView>& views);

}  // namespace ckpt
