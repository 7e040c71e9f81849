// The LibTorch facts this build was configured with, for pins. Torch-free:
// the version and CUDA flag come from CMake (find_package(Torch)), so `pin` and `verify
// --against-env` never load LibTorch.
#include "verifier/pins/pins.h"
#include "verifier/pins/torch_build_info.h"

namespace ckpt {

TorchFacts current_torch_facts() {
  return TorchFacts{libtorch_version(), built_with_cuda()};
}

}  // namespace ckpt
