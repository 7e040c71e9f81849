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

// The black-box drill on examples/pytorch/train.py against that program's own uninterrupted run of
// the same N+K steps: the drill's reference runs beside the subject, and the resumed run beside
// the rest of the reference, so on 2 cores the overhead is process starts, the kill and the reads.
BenchRow run_blackbox_drill_row(const BenchSettings& s) {
  const std::string name = "black-box drill vs the program's own run (examples/pytorch/train.py, N+K steps)";
  const std::string goal = "<= 1.3x";
  const std::string python = "/usr/bin/python3";
  const std::string example = s.source_dir + "/examples/pytorch/train.py";
  // Long enough that training, not the interpreter and torch import of each of the drill's three
  // processes, sets the pace: what a real run of hours looks like to the drill.
  const int64_t n = s.quick ? 200 : 8000;
  const std::string work = s.work_dir + "/blackbox";
  (void)remove_tree(work);
  const std::vector<std::string> own = {"/usr/bin/env",
                                        "CKPTCHECK_CKPT_DIR=" + work + "/own",
                                        "CKPTCHECK_STEPS=" + std::to_string(2 * n),
                                        "CKPTCHECK_SAVE_EVERY=" + std::to_string(n),
                                        "CKPTCHECK_METRICS=" + work + "/own.jsonl",
                                        python,
                                        example};
  auto baseline = run_child(own, false, 600);
  if (!baseline || baseline->exit_code != 0)
    return unavailable_row(name, goal, "error", baseline ? baseline->log_tail : baseline.status().message());
  auto drill = run_child({s.ckptcheck_bin, "drill", "--save-at", std::to_string(n), "--kill", "after-save",
                          "--work-dir", work, "--", python, example},
                         false, 900);
  (void)remove_tree(work);
  if (!drill) return unavailable_row(name, goal, "error", drill.status().message());
  if (drill->exit_code != 0)
    return unavailable_row(
        name, goal, "error",
        "ckptcheck drill exited " + std::to_string(drill->exit_code) + ": " + drill->log_tail);
  BenchRow row;
  row.name = name;
  const double ratio = drill->wall_seconds / baseline->wall_seconds;
  char text[64];
  std::snprintf(text, sizeof(text), " (%.2fx)", ratio);
  row.ours = format_seconds(drill->wall_seconds) + " whole drill" + text;
  row.baseline =
      format_seconds(baseline->wall_seconds) + " (" + std::to_string(2 * n) + " steps, one process)";
  row.ratio = baseline->wall_seconds / drill->wall_seconds;
  row.goal = goal;
  row.met = ratio <= 1.3 ? "yes" : "NO";
  row.numbers = {{"drill_wall_seconds", drill->wall_seconds},
                 {"own_run_wall_seconds", baseline->wall_seconds},
                 {"overhead_ratio", ratio},
                 {"steps", 2 * n}};
  return row;
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
  return {row, run_blackbox_drill_row(s)};
}

}  // namespace ckpt::bench
