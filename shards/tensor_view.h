// A borrowed, contiguous, row-major tensor: what the sharding layer splits and writes. The bytes
// belong to the caller (a torch tensor, a loaded buffer) and must outlive the view.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace ckpt {

struct TensorView {
  std::string name;
  std::string component;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// A tensor read back and reassembled from its chunks; owns its bytes.
struct LoadedTensor {
  std::string name;
  std::string component;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  TensorView view() const { return {name, component, dtype, shape, bytes.data(), bytes.size()}; }
};

}  // namespace ckpt
