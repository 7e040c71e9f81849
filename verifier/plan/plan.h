// `ckptcheck plan`: from one measured drill, what a full run needs. Pure arithmetic; every formula
// is stated where it is computed, and tests check them against hand-derived numbers.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/plan/hardware_catalog.h"
#include "verifier/plan/scaling_model.h"

namespace ckpt {

// What plan reads from a drill report's "measurements" (see plan_command.cpp for the shape).
struct DrillMeasurements {
  double peak_rss_bytes = 0;
  double parameter_bytes = 0;
  double gradient_bytes = 0;
  double optimizer_state_bytes = 0;
  double activation_bytes_estimate = 0;
  std::optional<double> cuda_max_reserved_bytes;  // present when the pilot ran on CUDA
  double step_seconds = 0;                        // forward+backward+optimizer, without the data wait
  double data_wait_seconds = 0;                   // per step
  double eval_seconds = 0;                        // one evaluation
  double checkpoint_save_seconds = 0;
  double checkpoint_bytes = 0;
  double restore_seconds = 0;
  double tokens_per_second = 0;
  int64_t eval_every_steps = 0;  // 0: no evaluation during training
  // A drill of any program (run_measurements.h) may give these instead of an activation estimate:
  // the program's own peak of one full step, and the resident set sampled from outside, per rank.
  std::optional<double> reported_peak_bytes;
  std::optional<double> sampled_peak_bytes;
  bool activation_measured = true;  // false: activation_bytes_estimate was null
  // Where each figure came from, by report key: "measured: ...", "reported by the program: ...",
  // "derived: ...", "assumed: ..." or "not measured" (then the figure is 0). A report without
  // sources is the built-in workload's, which measures everything it reports.
  std::map<std::string, std::string> sources;

  double state_bytes() const { return parameter_bytes + gradient_bytes + optimizer_state_bytes; }
};

// Reads report["measurements"]; a missing or mistyped field is kInvalidArgument naming its path
// ("report.json: measurements.timings: missing field 'step_seconds_mean'"). A field that is null
// was not measured: 0 and "not measured" in sources, except the two a plan cannot do without
// (step_seconds_mean, checkpoint_save_seconds), which are kInvalidArgument.
Result<DrillMeasurements> parse_drill_measurements(const nlohmann::json& report, const std::string& where);

// The peak memory of one replica and where it came from, in this order: CUDA max reserved, the
// program's reported peak_memory_bytes, params+grads+optimizer+activation estimate (the built-in
// workload), the resident set sampled from outside per rank, params+grads+optimizer alone.
struct PeakMemory {
  double bytes = 0;
  std::string source;
};
PeakMemory peak_memory(const DrillMeasurements& m);

struct MemoryFit {
  double peak_bytes = 0;             // peak_memory(m).bytes
  double replica_bytes = 0;          // (peak + runtime overhead) * (1 + headroom): one full replica
  bool replica_fits = false;         // single device, or DDP with a full replica per device
  int fsdp_devices = 0;              // smallest P in [2, gpus_per_node] whose shard fits; 0: none does
  double fsdp_bytes_per_device = 0;  // (state / P + non-state + overhead) * (1 + headroom) at that P
};
MemoryFit fit_memory(const DrillMeasurements& m, const Accelerator& accelerator, double headroom,
                     int gpus_per_node);

// Young/Daly optimum: sqrt(2 * C * MTBF).
double young_daly_interval_seconds(double checkpoint_seconds, double mtbf_seconds);
// Expected fraction lost to checkpoints and to rework after failures: C / interval + interval / (2 MTBF).
double checkpoint_overhead_fraction(double checkpoint_seconds, double interval_seconds, double mtbf_seconds);

struct RunTime {
  double compute_seconds = 0;     // steps * (step / speed + data wait) + evals * eval / speed
  int64_t evaluations = 0;        // floor(steps / eval_every)
  double interval_seconds = 0;    // Young/Daly
  int64_t checkpoints = 0;        // ceil(compute / interval): one at the end of every interval
  double checkpoint_seconds = 0;  // checkpoints * C (saving is I/O: not scaled by speed)
  double rework_seconds = 0;      // expected recomputation after failures: compute * interval / (2 MTBF)
  double restart_seconds = 0;     // expected restores: compute / MTBF failures * restore_seconds
  double overhead_fraction = 0;
};
RunTime estimate_run_time(const DrillMeasurements& m, int64_t total_steps, double relative_speed,
                          double mtbf_seconds);

struct PipelineBudget {
  PipelineHours around;         // download, preprocess, validation, export, copy-out
  double training_hours = 0;    // compute
  double checkpoint_hours = 0;  // checkpoint creation
  double rework_hours = 0;
  double restart_hours = 0;
  double total_hours = 0;
  double useful_work_fraction = 0;  // training compute / total
};
PipelineBudget pipeline_budget(const PipelineHours& around, const RunTime& run);

struct ReservationChoice {
  bool found = false;          // false: even the longest option cannot hold pipeline * (1 + margin)
  Reservation reservation;     // the smallest whose hours >= total * (1 + margin)
  double margin_fraction = 0;  // (hours - total) / total
  double cost_usd = 0;         // hours * gpus * usd_per_gpu_hour * price_multiplier
};
ReservationChoice choose_reservation(const PipelineBudget& budget, const std::vector<Reservation>& options,
                                     double margin, double usd_per_gpu_hour);

// `plan --scaling`: the data-parallel model calibrated on a pilot's world sizes.
struct ScalingSettings {
  ScalingModel model;
  nlohmann::json validation = nlohmann::json::array();  // validate_scaling_model() of the pilot's runs
  double min_efficiency = 0.7;  // adding accelerators "pays" while speedup / P stays at least this
  int max_world = 256;
};

// Reads a `ckptcheck pilot --scaling` report: its runs, recalibrated here (the report's own model
// is not trusted), and their validation. Errors name `where` and the field.
Result<ScalingSettings> scaling_from_pilot_report(const nlohmann::json& report, const std::string& where);

struct PlanSettings {
  int64_t total_steps = 0;
  double mtbf_hours = 24;
  double headroom = 0.10;
  double margin = 0.20;
  PipelineHours pipeline;
  std::optional<ScalingSettings> scaling;
};

// One object: settings, checkpoint cadence, and per accelerator memory fit, run time, budget and
// recommendation.
nlohmann::json make_plan(const DrillMeasurements& m, const HardwareCatalog& catalog,
                         const PlanSettings& settings);
std::string plan_table(const nlohmann::json& plan);

}  // namespace ckpt
