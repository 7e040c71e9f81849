#include "verifier/pilot/measured_run.h"

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/progress.h"
#include "base/seconds_since.h"
#include "verifier/process/child_process.h"

namespace ckpt {

namespace {
constexpr uint64_t kMaxSummaryBytes = 16ull << 20;
}  // namespace

Result<MeasuredRun> run_measured_training(const MeasuredRunSpec& spec, Progress* progress) {
  CKPT_RETURN_IF_ERROR(make_directory(spec.dir));
  // JSON is YAML: the resolved config loads back through the same validating parser as any file.
  const std::string config_path = spec.dir + "/config.yaml";
  CKPT_RETURN_IF_ERROR(write_file_atomically(config_path, spec.config.dump(1) + "\n"));
  std::vector<std::string> argv = {spec.executable};
  if (spec.nproc > 0) {  // `launch` runs this binary's own `train` in every rank
    for (const std::string& a : {std::string("launch"), std::string("--nproc-per-node"),
                                 std::to_string(spec.nproc), std::string("--")})
      argv.push_back(a);
  }
  for (const std::string& a :
       {std::string("train"), std::string("--config"), config_path, std::string("--steps"),
        std::to_string(spec.steps), std::string("--metrics"), spec.dir + "/metrics.jsonl",
        std::string("--summary"), spec.dir + "/summary.json", std::string("--eval-out"), spec.dir + "/eval",
        std::string("--ckpt-dir"), spec.dir + "/checkpoints", std::string("--measure-memory")})
    argv.push_back(a);
  if (progress) progress->message("pilot: " + spec.name);
  const auto start = std::chrono::steady_clock::now();
  CKPT_ASSIGN_OR_RETURN(ChildProcess child,
                        ChildProcess::spawn(argv, spec.dir + "/stdout.log", spec.dir + "/stderr.log", false));
  const ChildExit exit = child.wait(spec.timeout_seconds);
  if (!exit.ok()) {
    return Status::io_error("pilot run " + spec.name + " failed (" + exit.describe() +
                            "): " + log_tail(spec.dir + "/stderr.log"));
  }
  MeasuredRun run;
  run.name = spec.name;
  run.wall_seconds = seconds_since(start);
  run.max_rss_bytes = exit.max_rss_bytes;
  CKPT_ASSIGN_OR_RETURN(run.summary, read_json_file(spec.dir + "/summary.json", kMaxSummaryBytes));
  CKPT_ASSIGN_OR_RETURN(run.steps, read_step_metrics(spec.dir + "/metrics.jsonl"));
  const nlohmann::json& eval = run.summary.contains("eval") ? run.summary["eval"] : nlohmann::json();
  if (!eval.is_object() || !eval.contains("mean_loss") || !eval["mean_loss"].is_number()) {
    return Status::corruption(spec.dir + "/summary.json: pilot run " + spec.name + ": no eval.mean_loss");
  }
  run.eval_loss = eval["mean_loss"].get<double>();
  if (!run.summary.contains("timings") || !run.summary["timings"].is_object() ||
      !run.summary.contains("memory") || !run.summary["memory"].is_object()) {
    return Status::corruption(spec.dir + "/summary.json: pilot run " + spec.name + ": no timings or memory");
  }
  return run;
}

}  // namespace ckpt
