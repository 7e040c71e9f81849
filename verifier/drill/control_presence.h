// What the resumed run's final state must hold, decided by the control run instead of by names.
//
// A resumed run on another world size holds other per-rank state than the reference: a rank_1.pt,
// random_states_1.pkl or rank1/ directory the reference wrote at P ranks has no counterpart at Q,
// and a rank the world gained has state the reference never had. The control run (uninterrupted,
// at the resumed run's world size) shows what a run at Q holds, whatever the program names it:
//   reference and control hold it          -> the resumed run must too; compared with the reference
//   the control holds it, the reference not -> the resumed run must too, with the control's layout
//   neither the control nor the resumed run -> absent at world size Q, as in an uninterrupted run
//   the resumed run holds it, the control not -> a failure: no run at Q holds it
// Each tensor and each non-tensor value is placed on its own, so a component holding one tensor
// per rank (the built-in workload's `rng`) splits the same way as one file per rank.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

struct ControlPresence {
  StateSnapshot golden, resumed;                     // what both the reference and the control hold
  StateSnapshot control_only, resumed_control_only;  // what only the control holds (of the two)
  StateSnapshot resumed_extra;                       // what the resumed run holds and the control does not
  // Component -> names of what the reference held and neither the control nor the resumed run does.
  std::map<std::string, std::vector<std::string>> absent;
};

ControlPresence split_by_control(const StateSnapshot& golden, const StateSnapshot& control,
                                 const StateSnapshot& resumed);

// Only what both snapshots hold (by tensor and value name): what two runs can be compared on.
void keep_common(StateSnapshot* a, StateSnapshot* b);

// The resumed run against the control on what only the control (and not the reference) holds:
// every tensor and value present, with the control's dtype and shape. Values are not compared (no
// run at the reference's world size held them, so there is no restored value to check): a
// difference makes a component not bit-identical, never a failure.
std::map<std::string, ComponentDiff> compare_layout(const StateSnapshot& control,
                                                    const StateSnapshot& resumed);

}  // namespace ckpt
