// What a restore drill costs beyond the training it must do anyway: the whole `ckptcheck drill`
// (wall time of the child, which starts the reference run, kills, resumes and compares) against
// the time of the training steps it runs. The steps' time is the number of steps trained (the
// reference run plus every resumed run, from the report's loss curves) times the mean step time
// the reference run measured.
#include "bench/bench.h"

namespace ckpt::bench {

namespace {

size_t array_size_at(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key].size() : 0;
}

}  // namespace

std::vector<BenchRow> run_drill_bench(const BenchSettings& s) {
  const std::string name = "drill wall time vs its training steps (pilot.yaml, kill after-save)";
  const std::string goal = "reported";
  if (!has_subcommand(s.ckptcheck_bin, "drill")) {
    return {unavailable_row(name, goal, "not available",
                            "not available: this ckptcheck has no `drill` subcommand")};
  }
  const std::string work = s.work_dir + "/drill";
  const std::string config = s.source_dir + "/fixtures/configs/pilot.yaml";
  // One run, not best of 3: a drill is minutes of training on 2 cores, and its own report already
  // averages the step time over every step it ran.
  auto run = run_child(
      {s.ckptcheck_bin, "drill", "--config", config, "--kill", "after-save", "--work-dir", work, "--json"},
      true, s.quick ? 120 : 240);
  (void)remove_tree(work);
  if (!run) return {unavailable_row(name, goal, "error", run.status().message())};
  if (run->exit_code != 0) {
    return {
        unavailable_row(name, goal, "error",
                        "ckptcheck drill exited " + std::to_string(run->exit_code) + ": " + run->log_tail)};
  }
  const nlohmann::json report = nlohmann::json::parse(run->out, nullptr, false);
  if (report.is_discarded() || !report.contains("losses") || !report.contains("measurements")) {
    return {unavailable_row(name, goal, "error", "ckptcheck drill --json: no report on stdout")};
  }
  const nlohmann::json& losses = report["losses"];
  size_t steps = array_size_at(losses, "reference");
  if (losses.contains("resumed_by_mode") && losses["resumed_by_mode"].is_object()) {
    for (const auto& [mode, curve] : losses["resumed_by_mode"].items())
      steps += curve.is_array() ? curve.size() : 0;
  }
  const nlohmann::json& timings = report["measurements"].value("timings", nlohmann::json::object());
  const double step_mean = timings.value("step_seconds_mean", 0.0);
  if (steps == 0 || step_mean <= 0)
    return {unavailable_row(name, goal, "error", "drill report has no step timings")};
  const double training = static_cast<double>(steps) * step_mean;
  BenchRow row;
  row.name = name;
  char overhead[64];
  std::snprintf(overhead, sizeof(overhead), " whole drill (%.1fx its training)",
                run->wall_seconds / training);
  row.ours = format_seconds(run->wall_seconds) + overhead;
  row.baseline =
      format_seconds(training) + " (" + std::to_string(steps) + " steps x " + format_seconds(step_mean) + ")";
  row.goal = goal;
  row.met = "reported";
  row.numbers = {{"drill_wall_seconds", run->wall_seconds},
                 {"steps_trained", steps},
                 {"step_seconds_mean", step_mean},
                 {"training_seconds", training},
                 {"overhead_seconds", run->wall_seconds - training},
                 {"overhead_ratio", run->wall_seconds / training},
                 {"report_timings", timings}};
  return {row};
}

}  // namespace ckpt::bench
