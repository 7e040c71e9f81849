#include "verifier/pilot/pilot_study.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "base/file_io.h"
#include "base/progress.h"
#include "fixtures/pilot_config.h"
#include "verifier/pilot/measured_run.h"
#include "verifier/plan/scaling_model.h"
#include "verifier/process/child_process.h"

namespace ckpt {

namespace {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double number_at(const nlohmann::json& obj, const char* section, const char* key) {
  if (!obj.contains(section) || !obj[section].is_object()) return 0;
  const nlohmann::json& s = obj[section];
  return s.contains(key) && s[key].is_number() ? s[key].get<double>() : 0;
}

class Study {
 public:
  Study(const PilotStudyOptions& options, Progress* progress) : o_(options), progress_(progress) {}

  PilotStudy run() {
    PilotStudy out;
    Status s = prepare();
    if (s.is_ok() && o_.matrix) s = run_matrix();
    if (s.is_ok() && !o_.scaling_worlds.empty()) s = run_scaling();
    if (progress_) progress_->finish();
    out.report = report_;
    if (!s.is_ok()) {
      out.exit_code = 2;
      out.error = s.message();
      return out;
    }
    out.exit_code = passed_ ? 0 : 1;
    return out;
  }

 private:
  Status prepare() {
    if (!o_.matrix && o_.scaling_worlds.empty())
      return Status::invalid_argument("pilot: nothing to measure: give `matrix` and/or `scaling_worlds`");
    CKPT_ASSIGN_OR_RETURN(config_, load_pilot_config(o_.config_path));
    if (config_.device != "cpu") {
      return Status::not_supported(o_.config_path +
                                   ": device: the pilot runs the built-in workload on cpu, got '" +
                                   config_.device + "'");
    }
    steps_ = o_.steps > 0 ? o_.steps : config_.steps;
    exe_ = o_.executable;
    if (exe_.empty()) {
      CKPT_ASSIGN_OR_RETURN(exe_, current_executable());
    }
    CKPT_ASSIGN_OR_RETURN(work_, make_scratch_directory(o_.work_dir, "ckptcheck-pilot"));
    cores_ = o_.cores > 0 ? o_.cores : usable_cores();
    report_ = {{"kind", "ckptcheck-pilot"},
               {"config_path", o_.config_path},
               {"config", config_.resolved()},
               {"steps", steps_},
               {"cores", cores_},
               {"work_dir", work_}};
    return Status::ok();
  }

  // The config as a child loads it: resolved, with the data file's absolute path (the variant's
  // config.yaml lives in the scratch dir, not beside the original).
  nlohmann::json variant_config(const std::string& precision, const std::string& ac,
                                const std::string& strategy) const {
    nlohmann::json c = config_.resolved();
    c["precision"] = precision;
    if (ac == "none") {
      c.erase("activation_checkpointing");
    } else {
      c["activation_checkpointing"] = ac;
    }
    c["strategy"] = strategy;
    c["data"]["path"] = config_.data.path;
    return c;
  }

  Result<MeasuredRun> measure(const std::string& name, const std::string& dir, nlohmann::json config,
                              int nproc) {
    MeasuredRunSpec spec;
    spec.name = name;
    spec.config = std::move(config);
    spec.steps = steps_;
    spec.nproc = nproc;
    spec.dir = work_ + "/" + dir;
    spec.executable = exe_;
    spec.timeout_seconds = o_.child_timeout_seconds;
    return run_measured_training(spec, progress_);
  }

  Status run_matrix() {
    std::vector<VariantMeasurement> variants;
    // One after another, never side by side: each variant's step time is its own.
    for (const auto& [precision, ac] : matrix_variants()) {
      VariantMeasurement v;
      v.precision = precision;
      v.activation_checkpointing = ac;
      CKPT_ASSIGN_OR_RETURN(MeasuredRun run, measure(v.name(), "matrix-" + v.name(),
                                                     variant_config(precision, ac, config_.strategy), 0));
      v.step_peak_rss_bytes = number_at(run.summary, "memory", "peak_rss_bytes");
      v.step_rss_before_bytes = number_at(run.summary, "memory", "rss_before_bytes");
      v.step_seconds = number_at(run.summary, "timings", "step_seconds_mean");
      v.tokens_per_second = number_at(run.summary, "timings", "tokens_per_second");
      for (const StepRecord& s : run.steps) v.losses.push_back(s.loss);
      v.eval_loss = run.eval_loss;
      const nlohmann::json& eval = run.summary["eval"];
      if (eval.contains("logits_sha256") && eval["logits_sha256"].is_string())
        v.eval_logits_sha256 = eval["logits_sha256"];
      variants.push_back(std::move(v));
    }
    CKPT_ASSIGN_OR_RETURN(nlohmann::json matrix, analyze_matrix(variants, o_.matrix_options));
    passed_ = passed_ && matrix["passed"].get<bool>();
    report_["matrix"] = std::move(matrix);
    return Status::ok();
  }

  Status run_scaling() {
    if (config_.strategy == "fsdp") {
      return Status::invalid_argument(o_.config_path +
                                      ": strategy: --scaling models data parallelism (ddp); got 'fsdp'");
    }
    nlohmann::json runs = nlohmann::json::array();
    std::vector<ScalingPoint> points;
    double gradient_bytes = 0;
    for (int world : o_.scaling_worlds) {
      if (world < 1 || config_.micro_batch % world != 0) {
        return Status::invalid_argument(
            o_.config_path + ": micro_batch " + std::to_string(config_.micro_batch) +
            " (the global micro-batch) is not divisible by world size " + std::to_string(world));
      }
    }
    for (int world : o_.scaling_worlds) {
      CKPT_ASSIGN_OR_RETURN(
          MeasuredRun run,
          measure("world " + std::to_string(world), "world-" + std::to_string(world),
                  variant_config(config_.precision, config_.activation_checkpointing, "ddp"), world));
      const bool oversubscribed = static_cast<int64_t>(world) * config_.threads > cores_;
      nlohmann::json entry = {{"world_size", world},
                              {"oversubscribed", oversubscribed},
                              {"timings", run.summary["timings"]},
                              {"memory", run.summary["memory"]},
                              {"eval_loss", run.eval_loss}};
      CKPT_ASSIGN_OR_RETURN(ScalingPoint point,
                            scaling_point_from_json(entry, "pilot scaling run " + std::to_string(world)));
      if (world == 1) gradient_bytes = number_at(run.summary, "memory", "gradient_bytes");
      points.push_back(point);
      runs.push_back(std::move(entry));
    }
    nlohmann::json scaling = {{"runs", runs}, {"gradient_bytes", gradient_bytes}};
    std::vector<int> calibrated_on;
    Result<ScalingModel> model = calibrate_scaling_model(points, gradient_bytes, &calibrated_on);
    if (model.is_ok()) {
      scaling["model"] = model->to_json();
      scaling["validation"] = validate_scaling_model(*model, points, calibrated_on);
    } else {
      scaling["model_error"] = model.status().message();
    }
    report_["scaling"] = std::move(scaling);
    return Status::ok();
  }

  PilotStudyOptions o_;
  Progress* progress_;
  PilotConfig config_;
  int64_t steps_ = 0;
  std::string exe_, work_;
  int cores_ = 1;
  bool passed_ = true;
  nlohmann::json report_ = nlohmann::json::object();
};

}  // namespace

PilotStudy run_pilot_study(const PilotStudyOptions& options, Progress* progress) {
  return Study(options, progress).run();
}

}  // namespace ckpt
