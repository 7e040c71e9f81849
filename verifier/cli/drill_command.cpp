// `ckptcheck drill`: the kill-and-relaunch restore drill (verifier/drill.h) and its reports.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "base/progress.h"
#include "verifier/cli/commands.h"
#include "verifier/cli/option_flags.h"
#include "verifier/drill/drill.h"
#include "verifier/drill/drill_history.h"
#include "verifier/drill/drill_junit.h"
#include "verifier/drill/drill_report.h"
#include "verifier/drill/fault_catalogue.h"

namespace ckpt {
namespace {

// The options that only the built-in workload (--config) reads: a program of your own has its own
// flags for them, and the drill refuses --inject with one.
constexpr const char* kBuiltInOnly = "Built-in workload only (--config, not -- COMMAND)";

class DrillCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("drill",
                                       "Kill training with SIGKILL at a checkpoint, resume it, and prove "
                                       "it matches an uninterrupted run");
    sub->add_option("--config", o_.config_path,
                    "the built-in workload's pilot config YAML (without -- COMMAND)")
        ->group(kBuiltInOnly);
    sub->add_option("--save-at", o_.save_at,
                    "kill at the checkpoint of step N; required with -- COMMAND (with --config the default "
                    "is the config's steps / 2)");
    sub->add_option("--resume-steps", o_.resume_steps,
                    "train K steps after N (default: N): every run is given CKPTCHECK_STEPS=N+K");
    sub->add_option("--kill", kill_, "after-save | during-save | both")->capture_default_str();
    sub->add_option("--rtol", o_.tolerance.rtol, "relative tolerance (default 0: bit-identical)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--atol", o_.tolerance.atol, "absolute tolerance (default 0)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--report-dir", report_dir_, "write report.json and report.html here");
    sub->add_option("--inject", o_.inject,
                    "negative control: drop-optimizer-state | reset-scheduler | skip-rng-restore | "
                    "skip-data-position | reset-loss-scaler | stale-shard")
        ->group(kBuiltInOnly);
    sub->add_option("--long-run", o_.long_run_path, "refuse a pilot that would hide this long run's memory")
        ->group(kBuiltInOnly);
    sub->add_option("--shards", o_.shards, "shard files per checkpoint")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096))
        ->group(kBuiltInOnly);
    sub->add_option("--format", o_.format, "shard format: native | safetensors | hdf5")
        ->capture_default_str()
        ->group(kBuiltInOnly);
    sub->add_option("--work-dir", o_.work_dir,
                    "scratch checkpoints and logs go in a fresh dir ckptcheck-drill-* inside this one "
                    "(default $TMPDIR, else /tmp); removed after a pass, kept after a failure");
    sub->add_flag("--keep-work-dir", o_.keep_work_dir, "keep the scratch dir after a pass too");
    sub->add_option("--child-timeout", o_.child_timeout_seconds,
                    "seconds any one child may run before it is killed")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--nproc-per-node", o_.nproc, "run every training run with P ranks through `launch`")
        ->check(CLI::Range(1, 1024));
    sub->add_option("--resume-nproc", o_.resume_nproc, "resume with Q ranks (default: --nproc-per-node)")
        ->check(CLI::Range(1, 1024));
    sub->add_option("--launcher", o_.launcher,
                    "local (child processes) | slurm (every run a job step: srun, killed with scancel "
                    "--signal=KILL)")
        ->capture_default_str();
    sub->add_option("--nodes", o_.nodes, "slurm: nodes of the subject and reference runs")
        ->capture_default_str()
        ->check(CLI::Range(1, 65536));
    sub->add_option("--ntasks-per-node", o_.nproc, "slurm: ranks per node (the same as --nproc-per-node)")
        ->check(CLI::Range(1, 1024));
    sub->add_option("--resume-nodes", o_.resume_nodes, "slurm: nodes of the resumed run (default: --nodes)")
        ->check(CLI::Range(1, 65536));
    sub->add_option(
        "--slurm-args", slurm_args_,
        "slurm: more srun/salloc arguments, split at spaces (e.g. \"--partition=gpu --time=30\")");
    sub->add_option("--slurm-start-timeout", o_.slurm_start_timeout_seconds,
                    "slurm: seconds a step or allocation may stay pending before the drill gives up")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option(
           "--save-every", o_.save_every,
           "the save interval, given as CKPTCHECK_SAVE_EVERY (default: gcd(N, K); N/2 for during-save, "
           "stale-shard and --faults)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--faults", o_.faults,
                    "fault drills: on copies of the checkpoint (" + fault_names(FaultKind::kCopy) +
                        ") and below the process, through the fault file system (" +
                        fault_names(FaultKind::kStorage) + "); docs/drill.md")
        ->delimiter(',');
    sub->add_option("--relaunch-dir", o_.relaunch_dir,
                    "the relaunch after a kill gets a new, empty checkpoint dir (fresh) or the subject's own "
                    "as the kill left it (same, as a restarted job finds it); storage faults always use same")
        ->capture_default_str();
    sub->add_flag("--control", o_.control,
                  "run a second uninterrupted reference to measure run-to-run noise (default when the world "
                  "size changes)");
    sub->add_option("--control-multiple", o_.control_multiple,
                    "a resumed value passes within this multiple of the run-to-run envelope")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option(
        "--live", o_.live_metrics,
        "drill a live (or finished) run: its contract log RUN_METRICS.jsonl is the golden values; "
        "resume -- PROGRAM from its newest checkpoint still on disk");
    sub->add_option("--checkpoint", o_.live_checkpoint, "--live: resume from this announced checkpoint");
    sub->add_option("--wait-timeout", o_.wait_timeout_seconds,
                    "--live: seconds to wait for the live run to reach step N+K")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--stall-timeout", o_.live_stall_seconds,
                    "--live: a live run whose log has not changed for this many seconds is not advancing "
                    "(crashed or stopped): exit 2 at once instead of waiting out --wait-timeout (default: "
                    "max(60, 10 x the run's median step interval); 0: never)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--junit", junit_path_, "write a JUnit XML file: one testcase per check");
    sub->add_option("--history", history_path_,
                    "append one JSON line per drill to this file; report.html then charts the trend");
    sub->add_flag("--json", json_, "print report.json to stdout");
    // Everything after `--` is the program to drill (CLI11 treats it as positionals).
    sub->add_option("command", o_.command, "the training program and its arguments, after --");
    sub->footer(
        "A program run (-- COMMAND) is told what to do through its environment: CKPTCHECK_STEPS=N+K "
        "(--save-at N plus --resume-steps K: every run trains to step N+K, the subject is killed at "
        "the checkpoint of step N), CKPTCHECK_SAVE_EVERY (--save-every), CKPTCHECK_CKPT_DIR, "
        "CKPTCHECK_METRICS and, on a relaunch, CKPTCHECK_RESUME; {steps}, {save_every}, {ckpt_dir}, "
        "{metrics} and {resume} in its arguments are replaced by the same values (docs/drill.md).");
    return sub;
  }

  bool take_program(const std::vector<std::string>& program) override {
    o_.command = program;
    return true;
  }

  int run() override {
    if (!o_.live_checkpoint.empty() && o_.live_metrics.empty()) {
      std::fprintf(stderr, "ckptcheck drill: --checkpoint needs --live RUN_METRICS\n");
      return kExitUsage;
    }
    if (o_.live_stall_seconds >= 0 && o_.live_metrics.empty()) {
      std::fprintf(stderr, "ckptcheck drill: --stall-timeout needs --live RUN_METRICS\n");
      return kExitUsage;
    }
    if (o_.command.empty() == o_.config_path.empty()) {
      std::fprintf(stderr,
                   "ckptcheck drill: give either --config F (the built-in workload) or -- COMMAND ARGS "
                   "(your program)\n");
      return kExitUsage;
    }
    if (!parse_kill_modes(kill_, &o_.modes)) {
      std::fprintf(stderr, "ckptcheck drill: --kill: expected after-save, during-save or both, got '%s'\n",
                   kill_.c_str());
      return kExitUsage;
    }
    o_.slurm_args = split_at_spaces(slurm_args_);
    // Across world sizes reductions run in another order: bit identity is not expected there, so
    // an unset tolerance becomes kCrossWorld*; the report's tolerance section says which applied.
    if (changes_world_size(o_) && o_.tolerance.exact()) {
      o_.tolerance.rtol = kCrossWorldRtol;
      o_.tolerance.atol = kCrossWorldAtol;
    }
    Progress progress;
    DrillOutcome outcome = run_resume_drill(o_, &progress);
    outcome.error = with_flags(outcome.error, drill_field_flags());  // report.json shows the flags too
    nlohmann::json report = drill_report_json(outcome, o_);
    if (!history_path_.empty()) {
      auto past = read_drill_history(history_path_);
      const nlohmann::json entry = drill_history_entry(report, std::time(nullptr));
      Status appended = past.is_ok() ? append_drill_history(history_path_, entry) : past.status();
      if (!appended.is_ok()) {
        std::fprintf(stderr, "ckptcheck drill: --history: %s\n", appended.to_string().c_str());
        return kExitUsage;
      }
      past->push_back(entry);
      report["history"] = *past;
    }
    if (!junit_path_.empty()) {
      Status written = write_drill_junit(junit_path_, report);
      if (!written.is_ok()) {
        std::fprintf(stderr, "ckptcheck drill: --junit: %s\n", written.to_string().c_str());
        return kExitUsage;
      }
    }
    if (!report_dir_.empty()) {
      Status written = write_drill_report(report_dir_, report);
      if (!written.is_ok()) {
        std::fprintf(stderr, "ckptcheck drill: %s\n", written.to_string().c_str());
        return kExitUsage;
      }
    }
    if (json_) {
      std::printf("%s\n", report.dump(1).c_str());
      std::fflush(stdout);  // the failure lines below go to stderr: never inside the JSON
    } else {
      print_summary(outcome);
    }
    if (outcome.exit_code == kExitUsage)
      std::fprintf(stderr, "ckptcheck drill: error: %s\n", outcome.error.c_str());
    std::fflush(stdout);
    // One cause first (a fresh start, state the checkpoint lacks, a component not restored), then
    // the failures it explains, earliest step first.
    if (!outcome.headline.empty()) std::fprintf(stderr, "CAUSE: %s\n", outcome.headline.c_str());
    for (const auto& f : outcome.failures) std::fprintf(stderr, "FAIL: %s\n", f.c_str());
    return outcome.exit_code;
  }

 private:
  void print_summary(const DrillOutcome& o) const {
    // N and K as planned; a drill that errored before planning shows what was asked ("?" where the
    // plan would have chosen), never 0.
    const bool planned = o.save_at > 0;
    const auto shown = [](int64_t v) { return v >= 0 ? std::to_string(v) : std::string("?"); };
    const std::string n = planned ? std::to_string(o.save_at) : shown(o_.save_at);
    const std::string k = planned ? std::to_string(o.resume_steps) : shown(o_.resume_steps);
    if (o.drill_mode == "live")
      std::printf("drill %s (live run %s): N=%s K=%s, %.1f s\n", o.verdict().c_str(), o_.live_metrics.c_str(),
                  n.c_str(), k.c_str(), o.wall_seconds);
    else
      std::printf("drill %s: N=%s K=%s kill=%s%s%s, %.1f s\n", o.verdict().c_str(), n.c_str(), k.c_str(),
                  kill_.c_str(), o_.inject.empty() ? "" : " inject=", o_.inject.c_str(), o.wall_seconds);
    for (const auto& c : o.checks)
      std::printf("  %-4s %-28s %-12s %s\n",
                  c.skipped  ? "warn"
                  : c.passed ? "ok"
                             : "FAIL",
                  c.name.c_str(), c.mode.c_str(), c.detail.c_str());
    size_t warnings = 0;
    for (const auto& c : o.checks) warnings += c.skipped ? 1 : 0;
    if (o.exit_code == 0)
      std::printf("PASS: resumed runs match %s %s%s\n",
                  o.drill_mode == "live" ? "the live run" : "the reference",
                  o.bit_identical ? "bit for bit" : "within tolerance (not bit-identical)",
                  warnings ? (", " + std::to_string(warnings) + " warning(s) above").c_str() : "");
    if (!report_dir_.empty())
      std::printf("report: %s/report.html\n", report_dir_.c_str());
    else
      std::printf("report: none written (--report-dir DIR writes DIR/report.html and DIR/report.json)\n");
    if (o.work_dir.empty()) return;
    if (!o.work_dir_kept)
      std::printf("work dir: %s removed (the drill passed; --keep-work-dir keeps it)\n", o.work_dir.c_str());
    else if (o.exit_code != 0)
      std::printf("work dir: %s kept: the runs' logs, metrics and checkpoints of this %s\n",
                  o.work_dir.c_str(), o.exit_code == 1 ? "failure" : "error");
    else
      std::printf("work dir: %s kept (--keep-work-dir)\n", o.work_dir.c_str());
  }

  static std::vector<std::string> split_at_spaces(const std::string& text) {
    std::vector<std::string> words;
    std::istringstream in(text);
    for (std::string w; in >> w;) words.push_back(w);
    return words;
  }

  DrillOptions o_;
  std::string slurm_args_;
  std::string kill_ = "after-save";
  std::string report_dir_, junit_path_, history_path_;
  bool json_ = false;
};

}  // namespace

const FieldFlags& drill_field_flags() {
  static const FieldFlags flags = {{"command", "-- COMMAND"},
                                   {"config_path", "--config"},
                                   {"save_at", "--save-at"},
                                   {"resume_steps", "--resume-steps"},
                                   {"save_every", "--save-every"},
                                   {"modes", "--kill"},
                                   {"inject", "--inject"},
                                   {"long_run_path", "--long-run"},
                                   {"shards", "--shards"},
                                   {"format", "--format"},
                                   {"work_dir", "--work-dir"},
                                   {"keep_work_dir", "--keep-work-dir"},
                                   {"child_timeout_seconds", "--child-timeout"},
                                   {"nproc", "--nproc-per-node"},
                                   {"resume_nproc", "--resume-nproc"},
                                   {"launcher", "--launcher"},
                                   {"nodes", "--nodes"},
                                   {"resume_nodes", "--resume-nodes"},
                                   {"slurm_args", "--slurm-args"},
                                   {"slurm_start_timeout_seconds", "--slurm-start-timeout"},
                                   {"faults", "--faults"},
                                   {"relaunch_dir", "--relaunch-dir"},
                                   {"control", "--control"},
                                   {"control_multiple", "--control-multiple"},
                                   {"live_metrics", "--live"},
                                   {"live_checkpoint", "--checkpoint"},
                                   {"wait_timeout_seconds", "--wait-timeout"},
                                   {"live_stall_seconds", "--stall-timeout"}};
  return flags;
}

std::unique_ptr<Command> make_drill_command() {
  return std::make_unique<DrillCommand>();
}

}  // namespace ckpt
