// What CMake's find_package(Torch) reported about the LibTorch this build links its training
// binary against. Compile-time facts, so torch-free code (pins, verify) can state them without
// loading LibTorch.
#pragma once

#include <string>

namespace ckpt {

std::string libtorch_version();  // "1.13.0"
bool built_with_cuda();          // Torch was configured with CUDA

}  // namespace ckpt
