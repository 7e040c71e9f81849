// `ckptcheck train ...` is served by `ckptcheck-train`, installed beside `ckptcheck`: the one
// program that links LibTorch. The front program execs it in place (same pid, stdout, stderr and
// signals), so a drill that SIGKILLs "its `ckptcheck train` child" kills the training process itself.
#pragma once

#include <string>

namespace ckpt {

constexpr const char* kTrainingBinaryName = "ckptcheck-train";

// The training program: beside the running executable (the build tree, <prefix>/bin), else in
// <prefix>/libexec/ckptcheck or <prefix>/libexec; the first path when none is executable.
std::string training_binary_path();

}  // namespace ckpt
