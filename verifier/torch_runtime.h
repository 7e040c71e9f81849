// Facts about the LibTorch this binary was built against, for pins and for device checks.
// Declared without Torch types so torch-free code can ask.
#pragma once

#include <string>

namespace ckpt {

std::string libtorch_version();  // "1.13.0"
bool built_with_cuda();          // what Torch reported at configure time
int cuda_device_count();         // 0 when not built with CUDA or no device is visible
void set_torch_threads(int threads);

}  // namespace ckpt
