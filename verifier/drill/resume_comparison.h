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

// The snapshot of the checkpoint a run announced for `step` (its checkpoint event).
Result<StateSnapshot> announced_snapshot(const MetricsLog& log, int64_t step, const std::string& run);

// Two runs with no restart between them (`runs`: "two uninterrupted runs", "two resumed runs from
// one snapshot"): their envelope over the state both hold, and a control_envelope check saying
// whether they were bit-identical there.
NoiseEnvelope measure_noise(DrillRecord& record, const std::vector<StepRecord>& golden_steps,
                            StateSnapshot golden_state, const std::vector<StepRecord>& control_steps,
                            StateSnapshot control_state, double multiple, const std::string& runs);

// The rules that judge a component of the final state (ComponentDiff::rule).
constexpr const char* kRuleBitExact = "bit-exact";   // bit-identical to the reference
constexpr const char* kRuleTolerance = "tolerance";  // within rtol/atol of the reference
constexpr const char* kRuleEnvelope = "envelope";    // within the control's run-to-run envelope
constexpr const char* kRuleAbsentAsInControl = "absent-as-in-control";  // neither the control holds it
constexpr const char* kRuleHeldAsInControl =
    "held-as-in-control";  // the control holds it: so must the resumed run

struct ResumeComparison {
  const std::vector<StepRecord>* golden_steps = nullptr;
  Tolerance tolerance;
  const NoiseEnvelope* envelope = nullptr;  // null without a control run
  int64_t expected_steps = 0;               // loss must be compared at this many steps
  // The control run's final state, when it decides what the resumed run must hold
  // (control_presence.h): on another world size. Null: the reference decides.
  const StateSnapshot* control_state = nullptr;
  int resumed_world_size = 0;                        // for the report's words; 0 if unknown
  std::string control_run = "an uninterrupted run";  // what the control run is, for the same
};

// One metric_<field> check per logged field; true when every value was bit-identical.
bool check_metrics(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                   const std::vector<StepRecord>& resumed);

// The final_state check (and a failure line per diverging component, after the mode's metric
// failures: failures read in the order of the steps where they appeared; `first_failure_of_mode`
// is no longer used), each component with the rule that judged it; true when bit-identical.
bool check_final_state(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                       StateSnapshot golden, StateSnapshot resumed, size_t first_failure_of_mode,
                       std::map<std::string, ComponentDiff>* components);

}  // namespace ckpt
