// Wall time elapsed since a steady_clock time point, in seconds: what reports and summaries record.
#pragma once

#include <chrono>

namespace ckpt {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ckpt
