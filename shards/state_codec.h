// TrainingState (torch tensors) <-> the torch-free TensorView / LoadedTensor of the sharding
// layer. Include only from *_torch.cpp files.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "fixtures/trainer.h"
#include "formats/dtype.h"
#include "shards/tensor_view.h"

namespace ckpt {

Result<DType> dtype_of(const at::Tensor& tensor);
at::ScalarType scalar_type_of(DType dtype);

// Views into the state's tensors (which must be contiguous CPU tensors and outlive the views).
Result<std::vector<TensorView>> views_of_state(const TrainingState& state);

// Copies viewed bytes (a mapped checkpoint's tensors) into new CPU tensors that outlive the views.
std::map<std::string, at::Tensor> tensors_from_views(const std::vector<TensorView>& views);

}  // namespace ckpt
