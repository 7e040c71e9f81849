#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench/bench.h"

namespace ckpt::bench {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double seconds_since(double start_seconds) {
  return now_seconds() - start_seconds;
}

Result<Timing> best_of(int repetitions, const std::function<Status()>& prepare,
                       const std::function<Status()>& run) {
  Timing timing;
  for (int i = 0; i < repetitions; ++i) {
    if (prepare) CKPT_RETURN_IF_ERROR(prepare());
    const double start = now_seconds();
    CKPT_RETURN_IF_ERROR(run());
    timing.all_seconds.push_back(seconds_since(start));
  }
  if (timing.all_seconds.empty()) return Status::invalid_argument("best_of: no repetitions");
  timing.best_seconds = *std::min_element(timing.all_seconds.begin(), timing.all_seconds.end());
  return timing;
}

std::string format_seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), seconds < 10 ? "%.3f s" : "%.1f s", seconds);
  return buf;
}

std::string format_rate(uint64_t bytes, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GB/s", static_cast<double>(bytes) / seconds / 1e9);
  return buf;
}

std::string format_ratio(double ratio) {
  if (std::isnan(ratio)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", ratio);
  return buf;
}

std::string format_mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / static_cast<double>(kMiB));
  return buf;
}

}  // namespace ckpt::bench
