// Seconds since this process was exec'd (from /proc/self/stat), so "process start and model load"
// includes the dynamic loading of LibTorch, which a timer started in main() would miss.
#pragma once

namespace ckpt {

double seconds_since_process_start();

}  // namespace ckpt
