// `ckptcheck train ...` is served by `ckptcheck-train`, installed beside `ckptcheck`: the one
// program that links LibTorch. The front program execs it in place (same pid, stdout, stderr and
// signals), so a drill that SIGKILLs "its `ckptcheck train` child" kills the training process itself.
#pragma once

#include <string>

namespace ckpt {

constexpr const char* kTrainingBinaryName = "ckptcheck-train";

// The training program next to the running executable (from /proc/self/exe).
std::string training_binary_path();

// Replaces this process with `ckptcheck-train` and the same arguments. Returns only on failure,
// with the exit code to use after printing why.
int exec_training_binary(int argc, char** argv);

}  // namespace ckpt
