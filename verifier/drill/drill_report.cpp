#include "verifier/drill/drill_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/file_io.h"
#include "verifier/drill/drill_html.h"

namespace ckpt {
namespace {

nlohmann::json losses_json(const std::vector<StepRecord>& steps) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : steps) a.push_back({{"step", s.step}, {"loss", s.loss}});
  return a;
}

// The number at `key`, null when there is none (never 0: "not measured" is not zero).
nlohmann::json number_at(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key] : nlohmann::json();
}

// Memory of the reference's measured step (a full step including the optimizer step).
nlohmann::json memory_json(const DrillOutcome& o) {
  nlohmann::json m =
      o.reference_summary.contains("memory") ? o.reference_summary["memory"] : nlohmann::json::object();
  m["measured_step"] = "the reference run's first step: zero_grad, forward, backward and the optimizer step";
  m["which"] = {{"peak_rss_bytes", "process resident set high-water mark over that step (measured)"},
                {"parameter_bytes", "model parameter tensors (computed from storage sizes)"},
                {"gradient_bytes", "gradient tensors (computed)"},
                {"optimizer_state_bytes", "AdamW exp_avg + exp_avg_sq (computed)"},
                {"activation_bytes_estimate", "peak RSS growth not explained by the above (derived)"}};
  m["cuda"] = nullptr;  // CPU build: no max_memory_allocated/reserved, no device report
  return m;
}

nlohmann::json timings_json(const DrillOutcome& o) {
  const nlohmann::json& ref = o.reference_summary;
  const nlohmann::json t = ref.contains("timings") ? ref["timings"] : nlohmann::json::object();
  const nlohmann::json save = ref.contains("saves") && ref["saves"].is_array() && !ref["saves"].empty()
                                  ? ref["saves"].back()
                                  : nlohmann::json::object();
  nlohmann::json restore, verify;
  for (const auto& m : o.modes) {
    const nlohmann::json r = number_at(m.resumed_summary, "restore_seconds");
    if (r.is_number() && (restore.is_null() || r.get<double>() > restore.get<double>())) restore = r;
    if (m.verify_seconds > 0 && (verify.is_null() || m.verify_seconds > verify.get<double>()))
      verify = m.verify_seconds;
  }
  const nlohmann::json bytes = number_at(save, "bytes");
  return {
      {"step_seconds_mean", number_at(t, "step_seconds_mean")},
      {"data_wait_seconds_mean", number_at(t, "data_wait_seconds_mean")},
      {"forward_backward_seconds_mean", number_at(t, "forward_backward_seconds_mean")},
      {"optimizer_seconds_mean", number_at(t, "optimizer_seconds_mean")},
      {"eval_seconds", number_at(ref, "eval_seconds")},
      {"checkpoint_save_seconds", number_at(save, "seconds")},
      {"checkpoint_bytes",
       bytes.is_number() ? nlohmann::json(static_cast<int64_t>(std::llround(bytes.get<double>()))) : bytes},
      {"checkpoint_mb_per_second", number_at(save, "mb_per_second")},
      {"restore_seconds", restore},
      {"verify_seconds", verify},
      {"process_start_seconds", number_at(ref, "process_start_seconds")},
      {"model_load_seconds", number_at(ref, "model_load_seconds")},
      {"tokens_per_second", number_at(t, "tokens_per_second")},
      {"drill_wall_seconds", o.wall_seconds}};
}

// What the report's measurements hold and where each came from. The built-in workload measures
// itself from inside (summary.json); any other program is measured by the drill from outside
// (run_measurements.h), and its unmeasured values are null.
nlohmann::json measurements_json(const DrillOutcome& o) {
  if (!o.built_in) {
    // A drill that stopped before the runs were measured (an error) measured nothing: null, not 0.
    nlohmann::json m =
        o.measured.is_object() && o.measured.contains("timings")
            ? o.measured
            : nlohmann::json{
                  {"memory", {{"peak_rss_bytes", nullptr}, {"checkpoint_component_bytes", nullptr}}},
                  {"timings",
                   {{"checkpoint_bytes", nullptr},
                    {"checkpoint_save_seconds", nullptr},
                    {"restore_seconds", nullptr},
                    {"step_seconds_mean", nullptr}}},
                  {"sources", nlohmann::json::object()}};
    for (const char* table : {"memory", "timings"})
      for (const auto& [key, value] : m[table].items())
        if (!m["sources"].contains(key)) m["sources"][key] = "not measured";
    m["timings"]["drill_wall_seconds"] = o.wall_seconds;
    m["sources"]["drill_wall_seconds"] = "measured: the whole drill";
    return m;
  }
  nlohmann::json m = {{"memory", memory_json(o)}, {"timings", timings_json(o)}, {"eval_every_steps", 0}};
  nlohmann::json sources = nlohmann::json::object();
  for (const char* table : {"memory", "timings"})
    for (const auto& [key, value] : m[table].items())
      if (value.is_number()) sources[key] = "measured: by the built-in workload";
  sources["peak_rss_bytes"] = "measured: the reference's resident-set high-water mark over one full step";
  for (const char* key : {"parameter_bytes", "gradient_bytes", "optimizer_state_bytes"})
    sources[key] = "measured: computed from tensor storage sizes";
  sources["activation_bytes_estimate"] = "derived: peak growth not explained by gradients";
  sources["eval_every_steps"] = "measured: the config (0: no evaluation during training)";
  m["sources"] = sources;
  if (o.measured.is_object() && !o.measured.empty()) m["outside"] = o.measured;
  return m;
}

// One entry per component, merged over the kill modes: the worst numbers, passed only if every
// mode passed; the per-mode detail is under modes[].components.
nlohmann::json merged_components(const DrillOutcome& o) {
  nlohmann::json merged = nlohmann::json::object();
  for (const auto& m : o.modes) {
    for (const auto& [name, c] : m.components) {
      nlohmann::json cj = to_json(c);
      if (!merged.contains(name)) {
        merged[name] = cj;
        continue;
      }
      nlohmann::json& e = merged[name];
      for (const char* k : {"max_abs", "max_rel"})
        if (cj[k].is_number() && e[k].is_number())
          e[k] = std::max(e[k].get<double>(), cj[k].get<double>());
        else if (!cj[k].is_number())
          e[k] = cj[k];
      e["bit_identical"] = e["bit_identical"].get<bool>() && c.bit_identical;
      if (e["passed"].get<bool>() && !c.passed) {
        e["first_diverging"] = cj["first_diverging"];
        e["message"] = cj["message"];
        // The rule that failed it is the one to report.
        if (cj.contains("rule")) e["rule"] = cj["rule"];
        if (cj.contains("note")) e["note"] = cj["note"];
      }
      e["passed"] = e["passed"].get<bool>() && c.passed;
    }
  }
  return merged;
}

// What names a mode in the report: its kill mode, or "live" for the live drill's resumed run (a live
// drill kills nothing).
std::string mode_key(const DrillOutcome& o, const ModeOutcome& m) {
  return o.drill_mode == "live" ? "live" : kill_mode_name(m.mode);
}

// A metric's value per step, [[step, value], ...]: "loss" or a field of the step lines.
nlohmann::json series_json(const std::vector<StepRecord>& steps, const std::string& field) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : steps) {
    if (field == "loss") {
      a.push_back({s.step, s.loss});
    } else if (auto it = s.values.find(field); it != s.values.end()) {
      a.push_back({s.step, it->second});
    }
  }
  return a;
}

// Every metric that failed its check, earliest first divergence first, with both series so the
// report can plot reference against resumed and their difference.
nlohmann::json diverging_metrics_json(const DrillOutcome& o) {
  struct Diverged {
    std::string field;
    int64_t first_step;
  };
  std::vector<Diverged> found;
  for (const auto& c : o.checks) {
    if (c.passed || c.skipped || c.name.rfind("metric_", 0) != 0) continue;
    const std::string field = c.name.substr(7);
    const int64_t step =
        c.numbers.contains("first_diverging_step") && c.numbers["first_diverging_step"].is_number()
            ? c.numbers["first_diverging_step"].get<int64_t>()
            : std::numeric_limits<int64_t>::max();
    bool seen = false;
    for (auto& d : found)
      if (d.field == field) {
        d.first_step = std::min(d.first_step, step);
        seen = true;
      }
    if (!seen) found.push_back({field, step});
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const Diverged& a, const Diverged& b) { return a.first_step < b.first_step; });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : found) {
    nlohmann::json by_mode = nlohmann::json::object();
    for (const auto& m : o.modes) by_mode[mode_key(o, m)] = series_json(m.resumed_steps, d.field);
    out.push_back({{"field", d.field},
                   {"first_diverging_step", d.first_step == std::numeric_limits<int64_t>::max()
                                                ? nlohmann::json()
                                                : nlohmann::json(d.first_step)},
                   {"reference", series_json(o.reference_steps, d.field)},
                   {"resumed_by_mode", by_mode}});
  }
  return out;
}

}  // namespace

nlohmann::json drill_report_json(const DrillOutcome& o, const DrillOptions& options) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : o.checks)
    checks.push_back({{"name", c.name},
                      {"mode", c.mode},
                      {"passed", c.passed},
                      {"skipped", c.skipped},
                      {"detail", c.detail},
                      {"seconds", c.seconds >= 0 ? nlohmann::json(c.seconds) : nlohmann::json()},
                      {"numbers", c.numbers}});
  nlohmann::json modes = nlohmann::json::array();
  nlohmann::json resumed_by_mode = nlohmann::json::object();
  for (const auto& m : o.modes) {
    nlohmann::json comps = nlohmann::json::object();
    for (const auto& [name, c] : m.components) comps[name] = to_json(c);
    modes.push_back(
        {{"kill", o.drill_mode == "live" ? nlohmann::json() : nlohmann::json(kill_mode_name(m.mode))},
         {"resumed_from_step", m.resumed_from_step},
         {"killed_at_step", o.drill_mode == "live" ? nlohmann::json() : nlohmann::json(o.save_at)},
         {"compared", m.compared},
         {"bit_identical", m.bit_identical},
         {"components", comps}});
    resumed_by_mode[mode_key(o, m)] = losses_json(m.resumed_steps);
  }
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& f : o.faults)
    faults.push_back({{"fault", f.fault},
                      {"outcome", fault_outcome_name(f.outcome)},
                      {"passed", f.passed},
                      {"detail", f.detail},
                      {"would_catch", f.would_catch}});
  std::string kill;
  for (KillMode k : options.modes) kill += (kill.empty() ? "" : "+") + std::string(kill_mode_name(k));
  nlohmann::json tolerance = {
      {"rtol", options.tolerance.rtol},
      {"atol", options.tolerance.atol},
      {"rule",
       "|resumed - reference| <= atol + rtol * |reference|; integer, U8 and BOOL "
       "tensors exactly"},
      {"applied", options.tolerance.exact() ? "exact (bit-identical required)"
                                            : "tolerance (bit identity reported, not required)"}};
  nlohmann::json report = {
      {"verdict", o.verdict()},
      {"exit_code", o.exit_code},
      {"error", o.error},
      {"headline", o.headline.empty() ? nlohmann::json() : nlohmann::json(o.headline)},
      {"failures", o.failures},
      {"bit_identical", o.bit_identical},
      {"tolerance", tolerance},
      {"drill",
       {{"mode", o.drill_mode},
        {"save_at", o.save_at},
        {"resume_steps", o.resume_steps},
        {"kill", kill},
        {"inject", options.inject},
        {"shards", options.shards},
        {"format", options.format},
        {"work_dir", o.work_dir},
        {"work_dir_kept", o.work_dir_kept},
        {"config_path", options.config_path},
        {"program", o.built_in ? nlohmann::json("built-in") : nlohmann::json(options.command)},
        {"control", options.control || changes_world_size(options)}}},
      {"faults", faults},
      {"checks", checks},
      {"components", merged_components(o)},
      {"modes", modes},
      {"diverging_metrics", diverging_metrics_json(o)},
      {"losses",
       {{"reference", losses_json(o.reference_steps)},
        {"resumed", o.modes.empty() ? nlohmann::json::array() : losses_json(o.modes[0].resumed_steps)},
        {"resumed_by_mode", resumed_by_mode}}},
      {"live", o.live},
      {"config", o.config},
      {"pins", o.pins},
      {"measurements", measurements_json(o)}};
  // The built-in workload's own settings: a program drill has no format, shards or config.
  if (!o.built_in)
    for (const char* key : {"shards", "format", "config_path", "inject"}) report["drill"].erase(key);
  // A live drill kills nothing: no kill mode (options.modes holds the default, unused).
  if (o.drill_mode == "live") report["drill"].erase("kill");
  return report;
}

Status write_drill_report(const std::string& dir, const nlohmann::json& report) {
  CKPT_RETURN_IF_ERROR(make_directory(dir));
  CKPT_RETURN_IF_ERROR(write_file_atomically(dir + "/report.json", report.dump(1) + "\n"));
  return write_file_atomically(dir + "/report.html", render_drill_html(report));
}

}  // namespace ckpt
