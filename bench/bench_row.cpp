#include "bench/bench.h"

namespace ckpt::bench {

std::string met_at_least(double ratio, double goal) {
  if (std::isnan(ratio)) return "error";
  return ratio >= goal ? "yes" : "NO";
}

BenchRow peak_rss_growth_row(const std::string& name, int64_t small_rss, int64_t large_rss) {
  const double growth = static_cast<double>(large_rss - small_rss);
  BenchRow row;
  row.name = name;
  row.ours = (growth >= 0 ? "+" : "") + format_mib(growth) + " (peak " +
             format_mib(static_cast<double>(large_rss)) + ")";
  row.baseline = "peak " + format_mib(static_cast<double>(small_rss)) + " on the small one";
  row.goal = "< 32 MiB";
  row.met = growth < kMaxPeakRssGrowth ? "yes" : "NO";
  row.numbers = {
      {"small_max_rss_bytes", small_rss}, {"large_max_rss_bytes", large_rss}, {"growth_bytes", growth}};
  return row;
}

BenchRow unavailable_row(const std::string& name, const std::string& goal, const std::string& met,
                         const std::string& reason) {
  BenchRow row;
  row.name = name;
  row.ours = reason;
  row.baseline = "-";
  row.goal = goal;
  row.met = met;
  row.numbers = {{"available", false}, {"reason", reason}};
  return row;
}

}  // namespace ckpt::bench
