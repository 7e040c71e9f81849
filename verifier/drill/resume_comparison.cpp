#include "verifier/drill/resume_comparison.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "base/json_fields.h"

namespace ckpt {

bool NoiseEnvelope::within(const std::map<std::string, double>& envelope, const std::string& key,
                           double max_abs) const {
  auto it = envelope.find(key);
  return it != envelope.end() && it->second > 0 && max_abs <= multiple * it->second;
}

bool is_rng_component(const std::string& component) {
  return component.rfind("rng", 0) == 0 &&
         (component.size() == 3 || !std::isalpha(static_cast<unsigned char>(component[3])));
}

void drop_rng_components(StateSnapshot* s) {
  s->tensors.erase(std::remove_if(s->tensors.begin(), s->tensors.end(),
                                  [](const LoadedTensor& t) { return is_rng_component(t.component); }),
                   s->tensors.end());
  for (auto it = s->values.begin(); it != s->values.end();)
    it = is_rng_component(it->second.component) ? s->values.erase(it) : std::next(it);
}

Result<StateSnapshot> announced_snapshot(const MetricsLog& log, int64_t step, const std::string& run) {
  for (auto it = log.checkpoints.rbegin(); it != log.checkpoints.rend(); ++it) {
    if (it->step != step) continue;
    auto snap = read_state_snapshot(it->path);
    if (!snap.is_ok())
      return snap.status().with_context(run + "'s checkpoint of step " + std::to_string(step) + " " +
                                        it->path);
    return snap;
  }
  return Status::corruption(run + " announced no checkpoint of step " + std::to_string(step) +
                            " (a {\"event\": \"checkpoint\", \"step\": " + std::to_string(step) +
                            ", \"path\": ...} line in CKPTCHECK_METRICS)");
}

NoiseEnvelope measure_noise(DrillRecord& record, const std::vector<StepRecord>& golden_steps,
                            StateSnapshot golden_state, const std::vector<StepRecord>& control_steps,
                            StateSnapshot control_state, bool drop_rng, double multiple,
                            const std::string& runs) {
  NoiseEnvelope noise;
  noise.multiple = multiple;
  const Tolerance exact;
  bool identical = true;
  nlohmann::json envelope = nlohmann::json::object();
  for (const auto& d : compare_step_metrics(golden_steps, control_steps, exact)) {
    noise.series[d.field] = d.max_abs;
    identical = identical && d.bit_identical;
    envelope[d.field] = d.max_abs;
  }
  if (drop_rng) {
    drop_rng_components(&golden_state);
    drop_rng_components(&control_state);
  }
  for (const auto& [name, c] : compare_snapshots(golden_state, control_state, exact)) {
    noise.components[name] = c.max_abs;
    identical = identical && c.bit_identical;
    envelope[name] = c.max_abs;
  }
  const std::string detail =
      identical
          ? runs + " are bit-identical: no noise to allow for"
          : runs + " of this program already differ (loss max abs " + format_number(noise.series["loss"]) +
                "): a resumed value passes within " + format_number(multiple) + "x that envelope";
  record.add_check({"control_envelope",
                    "",
                    true,
                    detail,
                    {{"bit_identical", identical}, {"max_abs", envelope}, {"multiple", multiple}}});
  return noise;
}

namespace {

// "0.29153 resumed 0.29172": as many digits as it takes for two different values to read
// differently (format_number's 3 would print "0.292 resumed 0.292").
std::string distinct_pair(double reference, double resumed) {
  char a[40], b[40];
  for (int digits = 3;; ++digits) {
    std::snprintf(a, sizeof a, "%.*g", digits, reference);
    std::snprintf(b, sizeof b, "%.*g", digits, resumed);
    if (std::string(a) != b || digits >= 17) break;
  }
  return std::string(a) + " resumed " + b;
}

}  // namespace

bool check_metrics(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                   const std::vector<StepRecord>& resumed) {
  bool identical = true;
  // The metric that diverged first comes first: it is nearest the cause (the checks, the failure
  // lines and the report keep this order).
  auto diffs = compare_step_metrics(*c.golden_steps, resumed, c.tolerance);
  std::stable_sort(diffs.begin(), diffs.end(), [](const SeriesDiff& a, const SeriesDiff& b) {
    const auto key = [](const SeriesDiff& d) {
      return d.first_diverging_step >= 0 ? d.first_diverging_step : std::numeric_limits<int64_t>::max();
    };
    return key(a) < key(b);
  });
  for (auto d : diffs) {
    identical = identical && d.bit_identical;
    const bool noise = !d.passed && d.missing_steps.empty() && d.missing_field.empty() && c.envelope &&
                       c.envelope->within(c.envelope->series, d.field, d.max_abs);
    const bool complete = d.field != "loss" || d.steps_compared == c.expected_steps;
    DrillCheck check{"metric_" + d.field, mode, (d.passed || noise) && complete, "", to_json(d)};
    if (d.first_diverging_step >= 0)
      check.detail =
          d.field + " diverged at step " + std::to_string(d.first_diverging_step) + ": reference " +
          distinct_pair(d.reference_at_first, d.resumed_at_first) + " (max abs " + format_number(d.max_abs) +
          ")" +
          (noise ? ", within " + format_number(c.envelope->multiple) + "x the run-to-run envelope" : "");
    else if (!d.missing_field.empty())
      check.detail = d.field + ": the resumed run stopped logging it (first at step " +
                     std::to_string(d.missing_field.front()) + ")";
    else if (!complete || !d.missing_steps.empty())
      check.detail = d.field + ": compared " + std::to_string(d.steps_compared) + " steps, expected " +
                     std::to_string(c.expected_steps);
    else
      check.detail =
          d.field + ": " + std::to_string(d.steps_compared) + " steps, max abs " + format_number(d.max_abs);
    record.add_check(check, check.detail);
  }
  return identical;
}

bool check_final_state(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                       StateSnapshot golden, StateSnapshot resumed, size_t /*first_failure_of_mode*/,
                       std::map<std::string, ComponentDiff>* components) {
  if (c.drop_rng) {
    drop_rng_components(&golden);
    drop_rng_components(&resumed);
  }
  *components = compare_snapshots(golden, resumed, c.tolerance);
  bool identical = true;
  std::vector<std::string> divergences;
  for (auto& [name, diff] : *components) {
    identical = identical && diff.bit_identical;
    if (!diff.passed && diff.first_mismatch.empty() && c.envelope &&
        c.envelope->within(c.envelope->components, name, diff.max_abs))
      diff.passed = true;  // within the run-to-run noise of this program
    if (!diff.passed) divergences.push_back(diff.divergence_message());
  }
  // After the mode's metric failures: the final checkpoint is the last step compared, and the
  // failures read in the order of the steps where things went wrong.
  for (const auto& d : divergences) record.out.failures.push_back(d + mode_suffix(mode));
  // Recorded without add_check: each divergence is already a failure line of its own.
  record.out.checks.push_back({"final_state",
                               mode,
                               divergences.empty(),
                               divergences.empty()
                                   ? std::to_string(components->size()) + " components match"
                                   : std::to_string(divergences.size()) + " component(s) diverged",
                               {{"components", components->size()}, {"diverged", divergences}}});
  return identical;
}

}  // namespace ckpt
