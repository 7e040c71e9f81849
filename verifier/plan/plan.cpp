#include "verifier/plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/byte_units.h"
#include "base/json_fields.h"

namespace ckpt {
namespace {

constexpr double kSecondsPerHour = 3600.0;

Result<double> non_negative(const nlohmann::json& obj, const char* key, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(double value, json_number(obj, key, where));
  if (!(value >= 0) || !std::isfinite(value)) {
    return Status::invalid_argument(where + ": field '" + key + "': expected a finite number >= 0, got " +
                                    obj.at(key).dump());
  }
  return value;
}

// A field that must be present and may be null (not measured): nullopt then, and "not measured"
// in sources. `optional` fields may be absent too (reports written before they existed).
Result<std::optional<double>> measured(const nlohmann::json& obj, const char* key, const std::string& where,
                                       DrillMeasurements* m, bool optional = false) {
  if ((optional && !obj.contains(key)) || (obj.contains(key) && obj[key].is_null())) {
    if (obj.contains(key)) m->sources[key] = "not measured";
    return std::optional<double>();
  }
  CKPT_ASSIGN_OR_RETURN(double value, non_negative(obj, key, where));
  if (!m->sources.count(key)) m->sources[key] = "measured";
  return std::optional<double>(value);
}

Status read_sources(const nlohmann::json& measurements, DrillMeasurements* m) {
  if (!measurements.contains("sources") || !measurements["sources"].is_object()) return Status::ok();
  for (const auto& [key, source] : measurements["sources"].items())
    if (source.is_string()) m->sources[key] = source.get<std::string>();
  return Status::ok();
}

Status read_memory(const nlohmann::json& memory, const std::string& where, DrillMeasurements* m) {
  CKPT_ASSIGN_OR_RETURN(auto peak_rss, measured(memory, "peak_rss_bytes", where, m));
  m->peak_rss_bytes = peak_rss.value_or(0);
  CKPT_ASSIGN_OR_RETURN(auto params, measured(memory, "parameter_bytes", where, m));
  m->parameter_bytes = params.value_or(0);
  CKPT_ASSIGN_OR_RETURN(auto grads, measured(memory, "gradient_bytes", where, m));
  m->gradient_bytes = grads.value_or(0);
  CKPT_ASSIGN_OR_RETURN(auto optimizer, measured(memory, "optimizer_state_bytes", where, m));
  m->optimizer_state_bytes = optimizer.value_or(0);
  CKPT_ASSIGN_OR_RETURN(auto activations, measured(memory, "activation_bytes_estimate", where, m));
  m->activation_bytes_estimate = activations.value_or(0);
  m->activation_measured = activations.has_value();
  CKPT_ASSIGN_OR_RETURN(m->reported_peak_bytes, measured(memory, "peak_memory_bytes", where, m, true));
  CKPT_ASSIGN_OR_RETURN(auto per_rank, measured(memory, "peak_rss_bytes_per_rank", where, m, true));
  m->sampled_peak_bytes = per_rank ? per_rank : peak_rss;
  if (memory.contains("cuda") && !memory["cuda"].is_null()) {  // null on a CPU-only drill
    CKPT_ASSIGN_OR_RETURN(const nlohmann::json* cuda, json_object(memory, "cuda", where));
    CKPT_ASSIGN_OR_RETURN(m->cuda_max_reserved_bytes,
                          non_negative(*cuda, "max_memory_reserved_bytes", where + ".cuda"));
  }
  return Status::ok();
}

Status read_timings(const nlohmann::json& timings, const std::string& where, DrillMeasurements* m) {
  const std::pair<const char*, double DrillMeasurements::*> fields[] = {
      {"step_seconds_mean", &DrillMeasurements::step_seconds},
      {"data_wait_seconds_mean", &DrillMeasurements::data_wait_seconds},
      {"eval_seconds", &DrillMeasurements::eval_seconds},
      {"checkpoint_save_seconds", &DrillMeasurements::checkpoint_save_seconds},
      {"checkpoint_bytes", &DrillMeasurements::checkpoint_bytes},
      {"restore_seconds", &DrillMeasurements::restore_seconds},
      {"tokens_per_second", &DrillMeasurements::tokens_per_second}};
  for (const auto& [key, field] : fields) {
    CKPT_ASSIGN_OR_RETURN(auto value, measured(timings, key, where, m));
    m->*field = value.value_or(0);
  }
  for (const char* key : {"step_seconds_mean", "checkpoint_save_seconds"})
    if (m->sources[key] == "not measured")
      return Status::invalid_argument(where + ": field '" + key +
                                      "' is null: the drill did not measure it (did the program log at "
                                      "least two steps and announce a checkpoint?)");
  // The Young/Daly interval divides by nothing, but a zero-cost checkpoint says the drill did not
  // measure one: refuse rather than plan "checkpoint continuously".
  if (m->checkpoint_save_seconds <= 0) {
    return Status::invalid_argument(where + ": field 'checkpoint_save_seconds': expected > 0, got 0");
  }
  return Status::ok();
}

double hours(double seconds) {
  return seconds / kSecondsPerHour;
}

const char* strategy_of(const MemoryFit& fit) {
  if (fit.replica_fits) return "ddp";
  return fit.fsdp_devices > 0 ? "fsdp" : "does not fit";
}

Result<DrillMeasurements> read_measurements(const nlohmann::json& report, const std::string& where) {
  DrillMeasurements m;
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* measurements, json_object(report, "measurements", where));
  const std::string at = where + ": measurements";
  CKPT_RETURN_IF_ERROR(read_sources(*measurements, &m));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* memory, json_object(*measurements, "memory", at));
  CKPT_RETURN_IF_ERROR(read_memory(*memory, at + ".memory", &m));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* timings, json_object(*measurements, "timings", at));
  CKPT_RETURN_IF_ERROR(read_timings(*timings, at + ".timings", &m));
  if (measurements->contains("eval_every_steps") && (*measurements)["eval_every_steps"].is_null()) {
    m.sources["eval_every_steps"] = "assumed: no evaluation during training (not measured)";
    return m;
  }
  CKPT_ASSIGN_OR_RETURN(m.eval_every_steps, json_int(*measurements, "eval_every_steps", at));
  if (m.eval_every_steps < 0) {
    return Status::invalid_argument(at + ": field 'eval_every_steps': expected >= 0, got " +
                                    std::to_string(m.eval_every_steps));
  }
  return m;
}

}  // namespace

Result<DrillMeasurements> parse_drill_measurements(const nlohmann::json& report, const std::string& where) {
  auto m = read_measurements(report, where);
  // The strict JSON accessors call a missing field corruption, as they must for a checkpoint; a
  // report handed to `plan` that lacks one is a bad argument.
  if (!m.is_ok() && is_damage(m.status())) return Status::invalid_argument(m.status().message());
  return m;
}

namespace {

std::string source_of(const DrillMeasurements& m, const char* key) {
  auto it = m.sources.find(key);
  return it == m.sources.end() ? "measured" : it->second;
}

}  // namespace

PeakMemory peak_memory(const DrillMeasurements& m) {
  if (m.cuda_max_reserved_bytes)
    return {*m.cuda_max_reserved_bytes, "measured: cuda.max_memory_reserved_bytes"};
  if (m.reported_peak_bytes)
    return {*m.reported_peak_bytes, "reported by the program: peak_memory_bytes of one full step"};
  if (m.activation_measured)
    return {m.state_bytes() + m.activation_bytes_estimate,
            "parameter+gradient+optimizer+activation estimate"};
  if (m.sampled_peak_bytes)
    return {*m.sampled_peak_bytes,
            "measured: resident set per rank sampled from outside (host memory; includes the "
            "interpreter and libraries)"};
  return {m.state_bytes(), "assumed: parameter+gradient+optimizer bytes alone (no peak was measured)"};
}

MemoryFit fit_memory(const DrillMeasurements& m, const Accelerator& accelerator, double headroom,
                     int gpus_per_node) {
  MemoryFit fit;
  const double state = m.state_bytes();
  fit.peak_bytes = peak_memory(m).bytes;
  // What FSDP cannot shard: activations, temporaries and allocator slack, i.e. the peak less the state.
  const double non_state = std::max(0.0, fit.peak_bytes - state);
  const double scale = 1 + headroom;
  fit.replica_bytes = (fit.peak_bytes + accelerator.runtime_overhead_bytes) * scale;
  fit.replica_fits = fit.replica_bytes <= accelerator.memory_bytes;
  for (int p = 2; p <= gpus_per_node; ++p) {
    const double per_device = (state / p + non_state + accelerator.runtime_overhead_bytes) * scale;
    if (per_device <= accelerator.memory_bytes) {
      fit.fsdp_devices = p;
      fit.fsdp_bytes_per_device = per_device;
      break;
    }
  }
  return fit;
}

double young_daly_interval_seconds(double checkpoint_seconds, double mtbf_seconds) {
  return std::sqrt(2 * checkpoint_seconds * mtbf_seconds);
}

double checkpoint_overhead_fraction(double checkpoint_seconds, double interval_seconds, double mtbf_seconds) {
  return checkpoint_seconds / interval_seconds + interval_seconds / (2 * mtbf_seconds);
}

RunTime estimate_run_time(const DrillMeasurements& m, int64_t total_steps, double relative_speed,
                          double mtbf_seconds) {
  RunTime run;
  const double steps = static_cast<double>(total_steps);
  // The data wait is the input pipeline's, on the host: a faster accelerator does not shorten it.
  run.evaluations = m.eval_every_steps > 0 ? total_steps / m.eval_every_steps : 0;
  run.compute_seconds = steps * (m.step_seconds / relative_speed + m.data_wait_seconds) +
                        static_cast<double>(run.evaluations) * m.eval_seconds / relative_speed;
  const double c = m.checkpoint_save_seconds;
  run.interval_seconds = young_daly_interval_seconds(c, mtbf_seconds);
  run.checkpoints = static_cast<int64_t>(std::ceil(run.compute_seconds / run.interval_seconds));
  run.checkpoint_seconds = static_cast<double>(run.checkpoints) * c;
  run.rework_seconds = run.compute_seconds * run.interval_seconds / (2 * mtbf_seconds);
  run.restart_seconds = run.compute_seconds / mtbf_seconds * m.restore_seconds;
  run.overhead_fraction = checkpoint_overhead_fraction(c, run.interval_seconds, mtbf_seconds);
  return run;
}

PipelineBudget pipeline_budget(const PipelineHours& around, const RunTime& run) {
  PipelineBudget budget;
  budget.around = around;
  budget.training_hours = hours(run.compute_seconds);
  budget.checkpoint_hours = hours(run.checkpoint_seconds);
  budget.rework_hours = hours(run.rework_seconds);
  budget.restart_hours = hours(run.restart_seconds);
  budget.total_hours = around.download + around.preprocess + around.validation + around.export_model +
                       around.copy_out + budget.training_hours + budget.checkpoint_hours +
                       budget.rework_hours + budget.restart_hours;
  budget.useful_work_fraction = budget.total_hours > 0 ? budget.training_hours / budget.total_hours : 0;
  return budget;
}

ReservationChoice choose_reservation(const PipelineBudget& budget, const std::vector<Reservation>& options,
                                     double margin, double usd_per_gpu_hour) {
  ReservationChoice choice;
  const Reservation* best = nullptr;
  for (const Reservation& option : options) {
    if (option.hours >= budget.total_hours * (1 + margin) && (!best || option.hours < best->hours))
      best = &option;
  }
  if (!best) return choice;
  choice.found = true;
  choice.reservation = *best;
  choice.margin_fraction = (best->hours - budget.total_hours) / budget.total_hours;
  choice.cost_usd = best->hours * best->gpus * usd_per_gpu_hour * best->price_multiplier;
  return choice;
}

namespace {

Result<ScalingSettings> read_scaling(const nlohmann::json& report, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* scaling, json_object(report, "scaling", where));
  const std::string at = where + ": scaling";
  CKPT_ASSIGN_OR_RETURN(const double gradient_bytes, json_number(*scaling, "gradient_bytes", at));
  if (!scaling->contains("runs") || !(*scaling)["runs"].is_array()) {
    return Status::invalid_argument(at + ": field 'runs': expected an array of measured world sizes");
  }
  std::vector<ScalingPoint> points;
  const nlohmann::json& runs = (*scaling)["runs"];
  for (size_t i = 0; i < runs.size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(ScalingPoint point,
                          scaling_point_from_json(runs[i], at + ".runs[" + std::to_string(i) + "]"));
    points.push_back(point);
  }
  ScalingSettings settings;
  std::vector<int> calibrated_on;
  CKPT_ASSIGN_OR_RETURN(settings.model, calibrate_scaling_model(points, gradient_bytes, &calibrated_on));
  settings.validation = validate_scaling_model(settings.model, points, calibrated_on);
  return settings;
}

}  // namespace

Result<ScalingSettings> scaling_from_pilot_report(const nlohmann::json& report, const std::string& where) {
  auto settings = read_scaling(report, where);
  // As for the drill report: a missing field is a bad argument to `plan`, not a damaged checkpoint.
  if (!settings.is_ok() && is_damage(settings.status()))
    return Status::invalid_argument(settings.status().message());
  return settings;
}

namespace {

nlohmann::json scaling_json(const ScalingSettings& sc, const Accelerator& a, const HardwareCatalog& catalog) {
  if (a.allreduce_bus_bytes_per_second <= 0) {
    return {{"modelled", false}, {"reason", "the catalog gives no allreduce_bus_bytes_per_second"}};
  }
  // Beyond one node the network sets the pace; without a figure for it, stay within the node.
  const double inter = catalog.internode_allreduce_bus_bytes_per_second;
  const int max_world = inter > 0 ? sc.max_world : std::min(sc.max_world, catalog.gpus_per_node);
  const ScalingCurve curve = scaling_curve(sc.model, a.relative_speed, a.allreduce_bus_bytes_per_second,
                                           inter, catalog.gpus_per_node, max_world, sc.min_efficiency);
  nlohmann::json points = nlohmann::json::array();
  for (size_t i = 0; i < curve.worlds.size(); ++i) {
    points.push_back({{"world_size", curve.worlds[i]},
                      {"step_seconds", curve.step_seconds[i]},
                      {"speedup", curve.speedup[i]},
                      {"efficiency", curve.efficiency[i]}});
  }
  return {{"modelled", true},
          {"intra_node_bus_bytes_per_second", a.allreduce_bus_bytes_per_second},
          {"inter_node_bus_bytes_per_second", inter},
          {"points", points},
          {"stops_paying_after", curve.stops_paying_after},
          {"fastest_world", curve.fastest_world}};
}

}  // namespace

namespace {

// Every figure of a plan and where it came from.
nlohmann::json plan_sources(const DrillMeasurements& m) {
  auto state = [&m] {
    std::string s;
    for (const char* key : {"parameter_bytes", "gradient_bytes", "optimizer_state_bytes"})
      s += (s.empty() ? "" : "; ") + std::string(key) + " " + source_of(m, key);
    return s;
  };
  return {{"peak_memory", peak_memory(m).source},
          {"state_bytes", state()},
          {"step_seconds", source_of(m, "step_seconds_mean")},
          {"data_wait_seconds", source_of(m, "data_wait_seconds_mean")},
          {"eval", source_of(m, "eval_seconds") + "; every " + std::to_string(m.eval_every_steps) +
                       " steps: " + source_of(m, "eval_every_steps")},
          {"checkpoint_save_seconds", source_of(m, "checkpoint_save_seconds")},
          {"checkpoint_bytes", source_of(m, "checkpoint_bytes")},
          {"restore_seconds", source_of(m, "restore_seconds")},
          {"tokens_per_second", source_of(m, "tokens_per_second")},
          {"relative_speed", "assumed: the catalog's relative_speed of each accelerator"},
          {"memory_capacity", "assumed: the catalog's memory_bytes and runtime_overhead_bytes"},
          {"mtbf_hours", "assumed: --mtbf-hours"},
          {"pipeline_hours", "assumed: the catalog's pipeline section or --<stage>-hours"}};
}

}  // namespace

nlohmann::json make_plan(const DrillMeasurements& m, const HardwareCatalog& catalog,
                         const PlanSettings& settings) {
  const double mtbf_seconds = settings.mtbf_hours * kSecondsPerHour;
  const double interval = young_daly_interval_seconds(m.checkpoint_save_seconds, mtbf_seconds);
  nlohmann::json plan = {
      {"settings",
       {{"total_steps", settings.total_steps},
        {"mtbf_hours", settings.mtbf_hours},
        {"headroom", settings.headroom},
        {"margin", settings.margin},
        {"peak_source", peak_memory(m).source}}},
      {"sources", plan_sources(m)},
      {"checkpoint",
       {{"cost_seconds", m.checkpoint_save_seconds},
        {"bytes", m.checkpoint_bytes},
        {"interval_seconds", interval},
        {"overhead_fraction",
         checkpoint_overhead_fraction(m.checkpoint_save_seconds, interval, mtbf_seconds)}}},
      {"speed_note",
       "relative_speed is an assumption from the catalog; replace it with a pilot measured on that "
       "hardware. Run time assumes the pilot's per-step work on one accelerator; `--scaling` models "
       "data-parallel step "
       "time from a pilot's measured compute, communication and input wait."},
      {"accelerators", nlohmann::json::array()}};
  if (settings.scaling) {
    plan["scaling"] = {{"model", settings.scaling->model.to_json()},
                       {"validation", settings.scaling->validation},
                       {"min_efficiency", settings.scaling->min_efficiency}};
  }
  for (const Accelerator& a : catalog.accelerators) {
    const MemoryFit fit = fit_memory(m, a, settings.headroom, catalog.gpus_per_node);
    const RunTime run = estimate_run_time(m, settings.total_steps, a.relative_speed, mtbf_seconds);
    const PipelineBudget budget = pipeline_budget(settings.pipeline, run);
    const ReservationChoice choice =
        choose_reservation(budget, catalog.reservations, settings.margin, a.usd_per_gpu_hour);
    plan["accelerators"].push_back({
        {"name", a.name},
        {"note", a.note},
        {"relative_speed", a.relative_speed},
        {"memory",
         {{"capacity_bytes", a.memory_bytes},
          {"peak_bytes", fit.peak_bytes},
          {"runtime_overhead_bytes", a.runtime_overhead_bytes},
          {"replica_bytes", fit.replica_bytes},
          {"replica_fits", fit.replica_fits},
          {"strategy", strategy_of(fit)},
          {"fsdp_devices", fit.fsdp_devices},
          {"fsdp_bytes_per_device", fit.fsdp_bytes_per_device}}},
        {"run",
         {{"compute_seconds", run.compute_seconds},
          {"evaluations", run.evaluations},
          {"checkpoints", run.checkpoints},
          {"checkpoint_seconds", run.checkpoint_seconds},
          {"rework_seconds", run.rework_seconds},
          {"restart_seconds", run.restart_seconds}}},
        {"budget_hours",
         {{"download", budget.around.download},
          {"preprocess", budget.around.preprocess},
          {"validation", budget.around.validation},
          {"training", budget.training_hours},
          {"checkpoints", budget.checkpoint_hours},
          {"rework", budget.rework_hours},
          {"restarts", budget.restart_hours},
          {"export", budget.around.export_model},
          {"copy_out", budget.around.copy_out},
          {"total", budget.total_hours}}},
        {"useful_work_fraction", budget.useful_work_fraction},
        {"recommendation",
         {{"found", choice.found},
          {"reservation", choice.found ? choice.reservation.name : "none holds the pipeline with the margin"},
          {"hours", choice.reservation.hours},
          {"margin_fraction", choice.margin_fraction},
          {"cost_usd", choice.cost_usd}}},
    });
    if (settings.scaling)
      plan["accelerators"].back()["scaling"] = scaling_json(*settings.scaling, a, catalog);
  }
  return plan;
}

namespace {

std::string scaling_table(const nlohmann::json& plan) {
  char line[512];
  std::string text =
      "data-parallel scaling, " + plan["scaling"]["model"]["formula"].get<std::string>() + ":\n";
  for (const auto& v : plan["scaling"]["validation"]) {
    std::snprintf(line, sizeof line, "  pilot world %d (%s%s): measured %.4g s, model %.4g s (%+.0f%%)\n",
                  v["world_size"].get<int>(), v["calibration"].get<bool>() ? "calibration" : "held out",
                  v["oversubscribed"].get<bool>() ? ", oversubscribed" : "",
                  v["measured_step_seconds"].get<double>(), v["predicted_step_seconds"].get<double>(),
                  100 * v["step_relative_error"].get<double>());
    text += line;
  }
  for (const auto& a : plan["accelerators"]) {
    const auto& sc = a["scaling"];
    if (!sc["modelled"].get<bool>()) {
      text +=
          "  " + a["name"].get<std::string>() + ": not modelled (" + sc["reason"].get<std::string>() + ")\n";
      continue;
    }
    std::string curve;
    for (const auto& p : sc["points"]) {
      std::snprintf(line, sizeof line, " %d:%.0f%%", p["world_size"].get<int>(),
                    100 * p["efficiency"].get<double>());
      curve += line;
    }
    std::snprintf(line, sizeof line,
                  "  %-14s efficiency by P%s; adding accelerators stops paying after %d (>= %.0f%%)\n",
                  a["name"].get<std::string>().c_str(), curve.c_str(), sc["stops_paying_after"].get<int>(),
                  100 * plan["scaling"]["min_efficiency"].get<double>());
    text += line;
  }
  return text;
}

}  // namespace

std::string plan_table(const nlohmann::json& plan) {
  char line[512];
  std::string text;
  const auto& ckpt = plan["checkpoint"];
  std::snprintf(line, sizeof line,
                "checkpoint: %.1f s each, Young/Daly interval %.1f s (MTBF %.1f h), overhead %.2f%%\n",
                ckpt["cost_seconds"].get<double>(), ckpt["interval_seconds"].get<double>(),
                plan["settings"]["mtbf_hours"].get<double>(), 100 * ckpt["overhead_fraction"].get<double>());
  text += line;
  std::snprintf(line, sizeof line, "memory peak from %s, headroom %.0f%%, reservation margin %.0f%%\n",
                plan["settings"]["peak_source"].get<std::string>().c_str(),
                100 * plan["settings"]["headroom"].get<double>(),
                100 * plan["settings"]["margin"].get<double>());
  text += line;
  std::snprintf(line, sizeof line, "%-14s %11s %9s %-10s %9s %10s %-20s %7s %7s\n", "accelerator",
                "replica GiB", "have GiB", "fit", "train h", "pipeline h", "reservation", "margin", "useful");
  text += line;
  for (const auto& a : plan["accelerators"]) {
    const auto& mem = a["memory"];
    std::string fit = mem["strategy"].get<std::string>();
    if (fit == "fsdp") fit += " x" + std::to_string(mem["fsdp_devices"].get<int>());
    const auto& rec = a["recommendation"];
    std::snprintf(line, sizeof line, "%-14s %11.1f %9.1f %-10s %9.1f %10.1f %-20s %6.0f%% %6.0f%%\n",
                  a["name"].get<std::string>().c_str(), mem["replica_bytes"].get<double>() / kBytesPerGiB,
                  mem["capacity_bytes"].get<double>() / kBytesPerGiB, fit.c_str(),
                  a["budget_hours"]["training"].get<double>(), a["budget_hours"]["total"].get<double>(),
                  rec["found"].get<bool>() ? rec["reservation"].get<std::string>().c_str() : "none fits",
                  100 * rec["margin_fraction"].get<double>(), 100 * a["useful_work_fraction"].get<double>());
    text += line;
    if (!a["note"].get<std::string>().empty()) text += "  note: " + a["note"].get<std::string>() + "\n";
  }
  if (plan.contains("scaling")) text += scaling_table(plan);
  text += "where the figures come from:\n";
  for (const auto& [figure, source] : plan["sources"].items())
    text += "  " + figure + ": " + source.get<std::string>() + "\n";
  text += "(" + plan["speed_note"].get<std::string>() + ")\n";
  return text;
}

}  // namespace ckpt
