#include "verifier/pins/torch_build_info.h"

namespace ckpt {

std::string libtorch_version() {
#ifdef CKPTCHECK_LIBTORCH_VERSION
  return CKPTCHECK_LIBTORCH_VERSION;
#else
  return "unknown";
#endif
}

bool built_with_cuda() {
#ifdef CKPTCHECK_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace ckpt
