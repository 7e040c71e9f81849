#include "bench/bench.h"

namespace ckpt::bench {

std::string met_at_least(double ratio, double goal) {
  if (std::isnan(ratio)) return "error";
  return ratio >= goal ? "yes" : "NO";
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
