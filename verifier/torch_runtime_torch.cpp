#include "verifier/torch_runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace ckpt {

int cuda_device_count() { return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0; }

void set_torch_threads(int threads) {
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
}

}  // namespace ckpt
