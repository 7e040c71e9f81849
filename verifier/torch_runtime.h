// Facts about the LibTorch runtime this process has loaded. Declared without Torch types; defined in
// torch_runtime_torch.cpp, so only the training binary (ckptcheck-train) can call these.
#pragma once

namespace ckpt {

int cuda_device_count();  // 0 when not built with CUDA or no device is visible
void set_torch_threads(int threads);

}  // namespace ckpt
