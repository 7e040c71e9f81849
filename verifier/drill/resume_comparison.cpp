#include "verifier/drill/resume_comparison.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>

#include "base/json_fields.h"
#include "formats/dtype.h"
#include "verifier/drill/control_presence.h"

namespace ckpt {

bool NoiseEnvelope::within(const std::map<std::string, double>& envelope, const std::string& key,
                           double max_abs) const {
  auto it = envelope.find(key);
  return it != envelope.end() && it->second > 0 && max_abs <= multiple * it->second;
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
                            StateSnapshot control_state, double multiple, const std::string& runs) {
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
  // On two world sizes the runs hold other per-rank state: the noise is what both hold.
  keep_common(&golden_state, &control_state);
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

namespace {

// Folds `from` (more of the same component, judged apart) into `into`.
void merge_component(ComponentDiff* into, const ComponentDiff& from) {
  if (into->component.empty()) {
    *into = from;
    return;
  }
  into->tensors += from.tensors;
  into->elements += from.elements;
  raise_to(&into->max_abs, from.max_abs);
  raise_to(&into->max_rel, from.max_rel);
  into->bit_identical = into->bit_identical && from.bit_identical;
  into->incomparable += from.incomparable;
  if (into->passed && !from.passed) {
    into->passed = false;
    into->first_diverging_tensor = from.first_diverging_tensor;
    into->first_mismatch = from.first_mismatch;
    into->first_max_abs = from.first_max_abs;
    into->first_index = from.first_index;
    into->first_elements = from.first_elements;
    into->first_differing_byte = from.first_differing_byte;
    into->rule = from.rule;
  }
}

std::string at_world_size(const ResumeComparison& c) {
  return c.resumed_world_size > 0 ? "at world size " + std::to_string(c.resumed_world_size)
                                  : "at the resumed run's world size";
}

// A component compared value by value with the reference: bit-exact, within the tolerance, or
// within the control's envelope (never when a tensor could not be compared at all).
void judge_values(ComponentDiff* diff, const std::string& name, const ResumeComparison& c) {
  if (diff->bit_identical) {
    diff->rule = kRuleBitExact;
    return;
  }
  if (diff->passed) {
    diff->rule = kRuleTolerance;
    return;
  }
  const auto envelope =
      c.envelope ? c.envelope->components.find(name) : std::map<std::string, double>::const_iterator();
  const bool measured = c.envelope && envelope != c.envelope->components.end() && envelope->second > 0;
  if (diff->incomparable == 0 && measured &&
      c.envelope->within(c.envelope->components, name, diff->max_abs)) {
    diff->passed = true;  // within the run-to-run noise of this program
    diff->rule = kRuleEnvelope;
    diff->note = "max abs " + format_number(diff->max_abs) + " within " +
                 format_number(c.envelope->multiple) + "x the run-to-run envelope " +
                 format_number(envelope->second);
    return;
  }
  diff->rule = measured ? kRuleEnvelope : c.tolerance.exact() ? kRuleBitExact : kRuleTolerance;
}

// The control decides what the resumed run must hold (control_presence.h); what both uninterrupted
// runs hold is judged by value against the reference.
std::map<std::string, ComponentDiff> judge_against_control(const StateSnapshot& golden,
                                                           const StateSnapshot& resumed,
                                                           const ResumeComparison& c) {
  const ControlPresence p = split_by_control(golden, *c.control_state, resumed);
  const std::string at = at_world_size(c);
  const std::string held_there = ", which " + c.control_run + " " + at + " holds (the control run)";
  std::map<std::string, ComponentDiff> judged = compare_snapshots(p.golden, p.resumed, c.tolerance);
  for (auto& [name, diff] : judged) {
    judge_values(&diff, name, c);
    if (!diff.passed && diff.first_mismatch == kMissingInTheResumedRun) {
      diff.rule = kRuleHeldAsInControl;
      diff.first_mismatch += held_there;
    }
  }
  for (auto [name, diff] : compare_layout(p.control_only, p.resumed_control_only)) {
    diff.rule = kRuleHeldAsInControl;
    if (diff.passed)
      diff.note = "new " + at + ": held with the layout of " + c.control_run +
                  " (the control run); its values are not compared: no run at the reference's world size "
                  "held them";
    else if (diff.first_mismatch == kMissingInTheResumedRun)
      diff.first_mismatch += held_there;
    merge_component(&judged[name], diff);
  }
  for (auto [name, diff] : compare_snapshots(StateSnapshot{}, p.resumed_extra, c.tolerance)) {
    diff.rule = kRuleAbsentAsInControl;
    diff.first_mismatch =
        "only in the resumed run: " + c.control_run + " " + at + " (the control run) does not hold it";
    merge_component(&judged[name], diff);
  }
  for (const auto& [name, absent] : p.absent) {
    const std::string what =
        std::to_string(absent.size()) + (absent.size() == 1 ? " tensor or value" : " tensors or values");
    auto it = judged.find(name);
    if (it != judged.end()) {
      it->second.bit_identical = false;
      it->second.note += (it->second.note.empty() ? "" : "; ") + what + " of the reference's absent " + at +
                         ", as in " + c.control_run;
      continue;
    }
    ComponentDiff& d = judged[name];
    d.component = name;
    d.bit_identical = false;
    d.rule = kRuleAbsentAsInControl;
    d.note = "absent " + at + ", as in " + c.control_run + " (the reference held " + what + ")";
  }
  return judged;
}

// "3 components match: bit-exact model, optimizer; absent-as-in-control rank_1 (absent at world
// size 1, as in an uninterrupted run)"; "7 components match, all bit-exact".
std::string rules_in_words(const std::map<std::string, ComponentDiff>& components) {
  std::map<std::string, std::vector<std::string>> by_rule;
  for (const auto& [name, d] : components) by_rule[d.rule].push_back(name);
  if (by_rule.size() == 1 && components.size() > 1) return ", all " + by_rule.begin()->first;
  std::string out;
  for (const char* rule :
       {kRuleBitExact, kRuleTolerance, kRuleEnvelope, kRuleHeldAsInControl, kRuleAbsentAsInControl}) {
    auto it = by_rule.find(rule);
    if (it == by_rule.end()) continue;
    out += (out.empty() ? ": " : "; ") + std::string(rule);
    for (size_t i = 0; i < it->second.size(); ++i) out += (i ? ", " : " ") + it->second[i];
    if (std::string(rule) == kRuleAbsentAsInControl || std::string(rule) == kRuleHeldAsInControl) {
      const ComponentDiff& first = components.at(it->second.front());
      if (first.passed && !first.note.empty())
        out += " (" + first.note.substr(0, first.note.find(" (")) + ")";
    }
  }
  return out;
}

// The value of a one-element step counter ("...step", "..._step_count", "...last_epoch",
// "...global_step"), if `name` is one.
bool is_step_counter(const std::string& name) {
  const std::string last =
      name.substr(name.find_last_of('.') == std::string::npos ? 0 : name.find_last_of('.') + 1);
  return last == "step" || last == "_step_count" || last == "last_epoch" || last == "global_step";
}

std::optional<double> counter_value(const SnapshotTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  if (n != 1) return std::nullopt;
  auto bytes = t.bytes();
  if (!bytes.is_ok() || (*bytes)->size() < dtype_size(t.dtype)) return std::nullopt;
  return element_as_double((*bytes)->data(), t.dtype);
}

// Evidence that a diverging component was saved but not restored: a step counter of it that the
// resumed run's final state holds at the reference's value less N (it restarted at 0 on the
// relaunch, and counted only the K steps since), e.g. AdamW's state.0.step 4 where the reference
// has 8. One entry per component, its first such counter.
nlohmann::json not_restored_evidence(const StateSnapshot& golden, const StateSnapshot& resumed,
                                     const std::map<std::string, ComponentDiff>& components, int64_t n,
                                     int64_t k) {
  nlohmann::json out = nlohmann::json::array();
  if (n <= 0) return out;
  std::set<std::string> named;
  auto consider = [&](const std::string& component, const std::string& name, double ref, double got) {
    auto it = components.find(component);
    if (it == components.end() || it->second.passed || named.count(component)) return;
    if (!(ref - got == static_cast<double>(n))) return;
    named.insert(component);
    out.push_back(
        {{"component", component},
         {"name", name},
         {"reference", ref},
         {"resumed", got},
         {"words", component + " not restored: its step count " + name + " is " + format_number(got) +
                       " in the resumed run's final checkpoint where the reference's is " +
                       format_number(ref) + ": it restarted at the relaunch from step " + std::to_string(n) +
                       " (counted K=" + std::to_string(k) + " steps, not N+K)"}});
  };
  std::map<std::string, const SnapshotTensor*> by_name;
  for (const auto& t : golden.tensors) by_name[t.name] = &t;
  for (const auto& t : resumed.tensors) {
    if (!is_step_counter(t.name)) continue;
    auto g = by_name.find(t.name);
    if (g == by_name.end()) continue;
    const auto ref = counter_value(*g->second), got = counter_value(t);
    if (ref && got) consider(g->second->component, t.name, *ref, *got);
  }
  for (const auto& [name, v] : resumed.values) {
    if (!is_step_counter(name) || !v.value.is_number()) continue;
    auto g = golden.values.find(name);
    if (g == golden.values.end() || !g->second.value.is_number()) continue;
    consider(g->second.component, name, g->second.value.get<double>(), v.value.get<double>());
  }
  return out;
}

// "1 of 3 components diverged: model (required bit-exact)": the rule each diverged one failed.
std::string diverged_in_words(const std::vector<std::string>& names,
                              const std::map<std::string, ComponentDiff>& components) {
  std::map<std::string, std::vector<std::string>> by_rule;
  for (const auto& n : names) by_rule[components.at(n).rule].push_back(n);
  std::string out = std::to_string(names.size()) + " of " + std::to_string(components.size()) +
                    (components.size() == 1 ? " component" : " components") + " diverged";
  bool first = true;
  for (const auto& [rule, list] : by_rule) {
    out += first ? ": " : "; ";
    first = false;
    for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i];
    out += " (required " + rule + ")";
  }
  return out;
}

}  // namespace

bool check_final_state(DrillRecord& record, const std::string& mode, const ResumeComparison& c,
                       StateSnapshot golden, StateSnapshot resumed, size_t /*first_failure_of_mode*/,
                       std::map<std::string, ComponentDiff>* components) {
  if (c.control_state) {
    *components = judge_against_control(golden, resumed, c);
  } else {
    *components = compare_snapshots(golden, resumed, c.tolerance);
    for (auto& [name, diff] : *components) judge_values(&diff, name, c);
  }
  bool identical = true;
  std::vector<std::string> divergences;
  nlohmann::json rules = nlohmann::json::object();
  for (const auto& [name, diff] : *components) {
    identical = identical && diff.bit_identical;
    rules[name] = diff.rule;
    if (!diff.passed) divergences.push_back(diff.divergence_message() + " [" + diff.rule + "]");
  }
  const int64_t last_step =
      c.golden_steps && !c.golden_steps->empty() ? c.golden_steps->back().step : c.expected_steps;
  const nlohmann::json not_restored =
      divergences.empty() ? nlohmann::json::array()
                          : not_restored_evidence(golden, resumed, *components, last_step - c.expected_steps,
                                                  c.expected_steps);
  std::vector<std::string> diverged_names;
  for (const auto& [name, diff] : *components)
    if (!diff.passed) diverged_names.push_back(name);
  // After the mode's metric failures: the final checkpoint is the last step compared, and the
  // failures read in the order of the steps where things went wrong.
  for (const auto& d : divergences) record.out.failures.push_back(d + mode_suffix(mode));
  // Recorded without add_check: each divergence is already a failure line of its own.
  DrillCheck final_check{"final_state",
                         mode,
                         divergences.empty(),
                         divergences.empty() ? std::to_string(components->size()) + " components match" +
                                                   rules_in_words(*components)
                                             : diverged_in_words(diverged_names, *components),
                         {{"components", components->size()},
                          {"diverged", divergences},
                          {"diverged_components", diverged_names},
                          {"rules", rules},
                          {"not_restored", not_restored}}};
  record.stamp(final_check);
  record.out.checks.push_back(std::move(final_check));
  return identical;
}

}  // namespace ckpt
