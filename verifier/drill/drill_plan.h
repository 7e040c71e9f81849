// The plan of a drill from scratch, before anything runs: N (the kill step), K (steps after it),
// the save interval the program is given, and every combination of options that cannot work,
// refused with one line naming them.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "verifier/drill/drill.h"

namespace ckpt {

struct DrillPlan {
  int64_t n = 0, k = 0, save_every = 0;
  bool control = false;  // a control run measures the noise (asked for, or the world size changes)
};

// `default_n`: N when --save-at is not given (the built-in workload's steps / 2), -1 for none.
Result<DrillPlan> plan_drill(const DrillOptions& options, int64_t default_n);

}  // namespace ckpt
