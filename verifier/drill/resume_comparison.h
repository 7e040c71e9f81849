// The comparison at the heart of every drill: a resumed run against golden values (an
// uninterrupted reference run, or a live run's own log and checkpoints), every metric at every
// common step and the final checkpoints tensor by tensor, by component, within the tolerance or
// within a multiple of the run-to-run noise measured by a control run.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/drill/drill_record.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

// How far two runs of the program differ with no restart at all, per metric and per component;
// a resumed value that differs from the golden one passes within `multiple` x that.
struct NoiseEnvelope {
  std::map<std::string, double> series, components;
  double multiple = 4;
  bool within(const std::map<std::string, double>& envelope, const std::string& key, double max_abs) const;
};

// "rng", and the per-rank RNG state programs keep in files of their own ("rng-rank1", "rng_3").
bool is_rng_component(const std::string& component);
// Across world sizes each rank has its own RNG stream: there is no counterpart to compare with.
void drop_rng_components(StateSnapshot* snapshot);

// The snapshot of the checkpoint a run announced for `step` (its checkpoint event).
Result<StateSnapshot> announced_snapshot(const MetricsLog& log, int64_t step, const std::string& run);

// Two runs with no restart between them (`runs`: "two uninterrupted runs", "two resumed runs from
// one snapshot"): their envelope, and a control_envelope check saying whether they were bit-identical.
NoiseEnvelope measure_noise(DrillRecord& record, const std::vector<StepRecord>& golden_steps,
                            StateSnapshot golden_state, const std::vector<StepRecord>& control_steps,
                            StateSnapshot control_state, bool drop_rng, double multiple,
                            const std::string& runs);

struct ResumeComparison {
  const std::vector<StepRecord>* golden_steps = nullptr;
  Tolerance tolerance;
  const NoiseEnvelope* envelope = nullptr;  // null without a control run
  int64_t expected_steps = 0;               // loss must be compared at this many steps
  bool drop_rng = false;                    // across world sizes
};

// One metric_<field> check per logged field; true when every value was bit-identical.
bool check_metrics(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                   const std::vector<StepRecord>& resumed);

// The final_state check (and a failure line per diverging component, after the mode's metric
// failures: failures read in the order of the steps where they appeared; `first_failure_of_mode`
// is no longer used); true when bit-identical.
bool check_final_state(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                       StateSnapshot golden, StateSnapshot resumed, size_t first_failure_of_mode,
                       std::map<std::string, ComponentDiff>* components);

}  // namespace ckpt
