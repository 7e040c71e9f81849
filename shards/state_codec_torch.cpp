#include "shards/state_codec_torch.h"

#include "base/mapped_file.h"

namespace ckpt {

Result<DType> dtype_of(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return DType::kF32;
    case at::kHalf: return DType::kF16;
    case at::kBFloat16: return DType::kBF16;
    case at::kDouble: return DType::kF64;
    case at::kLong: return DType::kI64;
    case at::kInt: return DType::kI32;
    case at::kShort: return DType::kI16;
    case at::kChar: return DType::kI8;
    case at::kByte: return DType::kU8;
    case at::kBool: return DType::kBool;
    default: return Status::not_supported(std::string("tensor dtype ") + c10::toString(tensor.scalar_type()));
  }
}

at::ScalarType scalar_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return at::kFloat;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
    case DType::kF64: return at::kDouble;
    case DType::kI64: return at::kLong;
    case DType::kI32: return at::kInt;
    case DType::kI16: return at::kShort;
    case DType::kI8: return at::kChar;
    case DType::kU8: return at::kByte;
    case DType::kBool: return at::kBool;
    // torch 1.13 has no unsigned or float8 types: the bits travel in a signed type of the same width.
    case DType::kU16: return at::kShort;
    case DType::kU32: return at::kInt;
    case DType::kU64: return at::kLong;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF8E4M3Fnuz:
    case DType::kF8E5M2Fnuz:
    case DType::kF8E8M0:
    case DType::kF4E2M1X2: return at::kByte;
    case DType::kC32: return at::kComplexHalf;
    case DType::kC64: return at::kComplexFloat;
    case DType::kC128: return at::kComplexDouble;
  }
  return at::kFloat;
}

Result<std::vector<TensorView>> views_of_state(const TrainingState& state) {
  std::vector<TensorView> views;
  views.reserve(state.size());
  for (const StateTensor& s : state) {
    if (!s.tensor.defined() || !s.tensor.is_contiguous() || !s.tensor.device().is_cpu()) {
      return Status::invalid_argument("state tensor " + s.name + " is not a defined, contiguous CPU tensor");
    }
    CKPT_ASSIGN_OR_RETURN(DType dtype, dtype_of(s.tensor));
    TensorView v;
    v.name = s.name;
    v.component = s.component;
    v.dtype = dtype;
    v.shape.assign(s.tensor.sizes().begin(), s.tensor.sizes().end());
    v.data = static_cast<const uint8_t*>(s.tensor.data_ptr());
    v.bytes = s.tensor.nbytes();
    views.push_back(std::move(v));
  }
  return views;
}

Result<StateViews> save_views_of_state(const TrainingState& state, int world_size) {
  CKPT_ASSIGN_OR_RETURN(std::vector<TensorView> views, views_of_state(state));
  StateViews out;
  for (size_t i = 0; i < state.size(); ++i) {
    const StateTensor& s = state[i];
    const bool rank_owned = !s.offsets.empty() || s.name.rfind("rng.", 0) == 0;
    if (world_size > 1 && rank_owned) {
      out.rank_tensors.push_back({std::move(views[i]), s.offsets, s.global_shape});
    } else {
      out.replicated.push_back(std::move(views[i]));
    }
  }
  return out;
}

Result<std::map<std::string, at::Tensor>> tensors_from_views(const std::vector<TensorView>& views) {
  std::map<std::string, at::Tensor> out;
  for (const TensorView& t : views) {
    at::Tensor tensor = at::empty(t.shape, at::TensorOptions().dtype(scalar_type_of(t.dtype)));
    if (t.bytes > 0) CKPT_RETURN_IF_ERROR(guarded_copy(tensor.data_ptr(), t.data, t.bytes, t.name));
    out.emplace(t.name, std::move(tensor));
  }
  return out;
}

}  // namespace ckpt
