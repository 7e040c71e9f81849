#include "verifier/torch_runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>

namespace ckpt {

std::string libtorch_version() { return TORCH_VERSION; }

bool built_with_cuda() {
#ifdef CKPTCHECK_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() { return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0; }

void set_torch_threads(int threads) {
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
}

}  // namespace ckpt
