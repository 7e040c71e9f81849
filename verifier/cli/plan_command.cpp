// `ckptcheck plan --report DRILL_REPORT.json --total-steps N [--catalog FILE]
//  [--mtbf-hours H] [--headroom F] [--margin F] [--<stage>-hours H ...] [--scaling PILOT_REPORT.json]
//  [--min-scaling-efficiency F] [--json]`
//
// The drill report is read defensively; its shape is
//   {"config": {...}, "measurements": {"memory": {peak_rss_bytes, rss_before_bytes, parameter_bytes,
//     gradient_bytes, optimizer_state_bytes, activation_bytes_estimate, "cuda": {...} (optional)},
//     "timings": {step_seconds_mean, data_wait_seconds_mean, ..., checkpoint_save_seconds, ...},
//     "eval_every_steps": N}}
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "verifier/cli/commands.h"
#include "verifier/plan/plan.h"
#include "verifier/process/child_process.h"

namespace ckpt {
namespace {

constexpr uint64_t kMaxReportBytes = 64ull << 20;

class PlanCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("plan", "size a full run from a drill report: memory fit, time, reservation");
    sub->add_option("--report", report_path_, "drill report JSON")->required();
    sub->add_option("--total-steps", settings_.total_steps, "optimizer steps of the full run")
        ->required()
        ->check(CLI::PositiveNumber);
    sub->add_option("--catalog", catalog_path_,
                    "hardware catalog YAML (default: <prefix>/share/ckptcheck/hardware.yaml beside the "
                    "binary, else the source tree's fixtures/hardware.yaml)");
    sub->add_option("--mtbf-hours", settings_.mtbf_hours, "mean time between failures")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--headroom", settings_.headroom, "memory headroom fraction")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--margin", settings_.margin, "time margin a reservation must leave")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    stage_flags_ = {
        {sub->add_option("--download-hours", stage_hours_[0])->check(CLI::NonNegativeNumber),
         &PipelineHours::download},
        {sub->add_option("--preprocess-hours", stage_hours_[1])->check(CLI::NonNegativeNumber),
         &PipelineHours::preprocess},
        {sub->add_option("--validation-hours", stage_hours_[2])->check(CLI::NonNegativeNumber),
         &PipelineHours::validation},
        {sub->add_option("--export-hours", stage_hours_[3])->check(CLI::NonNegativeNumber),
         &PipelineHours::export_model},
        {sub->add_option("--copy-out-hours", stage_hours_[4])->check(CLI::NonNegativeNumber),
         &PipelineHours::copy_out},
    };
    sub->add_option(
        "--scaling", scaling_path_,
        "a `ckptcheck pilot --scaling` report.json: model data-parallel step time per accelerator");
    sub->add_option("--min-scaling-efficiency", min_efficiency_,
                    "adding accelerators pays while speedup / P stays at least this")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    sub->add_flag("--json", json_, "print one JSON object instead of a table");
    return sub;
  }

  int run() override {
    if (catalog_path_.empty()) {
      auto exe = current_executable();
      auto found = find_hardware_catalog(hardware_catalog_candidates(exe.is_ok() ? *exe : ""));
      if (!found.is_ok()) return fail(Status::invalid_argument(found.status().message()));
      catalog_path_ = *found;
    }
    auto catalog = load_hardware_catalog(catalog_path_);
    if (!catalog.is_ok()) return fail(catalog.status());
    auto report = read_json_file(report_path_, kMaxReportBytes);
    if (!report.is_ok()) return fail(report.status());
    auto measurements = parse_drill_measurements(*report, report_path_);
    if (!measurements.is_ok()) return fail(measurements.status());

    if (!scaling_path_.empty()) {
      auto pilot = read_json_file(scaling_path_, kMaxReportBytes);
      if (!pilot.is_ok()) return fail(pilot.status());
      auto scaling = scaling_from_pilot_report(*pilot, scaling_path_);
      if (!scaling.is_ok()) return fail(scaling.status());
      settings_.scaling = std::move(scaling).value();
      settings_.scaling->min_efficiency = min_efficiency_;
    }
    // Stage hours default to the catalog's pipeline section; a flag given overrides its stage.
    settings_.pipeline = catalog->pipeline;
    for (size_t i = 0; i < stage_flags_.size(); ++i) {
      if (stage_flags_[i].first->count() > 0) settings_.pipeline.*stage_flags_[i].second = stage_hours_[i];
    }
    const nlohmann::json plan = make_plan(*measurements, *catalog, settings_);
    const std::string out = json_ ? plan.dump(2) + "\n" : plan_table(plan);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitOk;
  }

 private:
  static int fail(const Status& status) { return report_failure("plan", status); }

  std::string report_path_;
  std::string catalog_path_;  // "": found by find_hardware_catalog
  std::string scaling_path_;
  double min_efficiency_ = 0.7;
  PlanSettings settings_;
  double stage_hours_[5] = {0, 0, 0, 0, 0};
  std::vector<std::pair<CLI::Option*, double PipelineHours::*>> stage_flags_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> make_plan_command() {
  return std::make_unique<PlanCommand>();
}

}  // namespace ckpt
