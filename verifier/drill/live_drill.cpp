#include "verifier/drill/live_drill.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "base/file_io.h"
#include "base/progress.h"
#include "base/seconds_since.h"
#include "verifier/drill/checkpoint_checks.h"
#include "verifier/drill/drill_record.h"
#include "verifier/drill/fault_catalogue.h"
#include "verifier/drill/fault_drill.h"
#include "verifier/drill/live_snapshot.h"
#include "verifier/drill/live_stall.h"
#include "verifier/drill/program_launcher.h"
#include "verifier/drill/resume_comparison.h"
#include "verifier/drill/run_measurements.h"
#include "verifier/drill/save_watch.h"
#include "verifier/process/child_process.h"

namespace ckpt {

namespace {

namespace fs = std::filesystem;

constexpr double kLivePollSeconds = 0.5;
// After the live run logged step N+K: how long to wait for its checkpoint event of that step.
constexpr double kFinalCheckpointGraceSeconds = 60;

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const fs::path x = fs::weakly_canonical(a, ea), y = fs::weakly_canonical(b, eb);
  return !ea && !eb ? x == y : fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

int64_t last_step(const MetricsLog& log) {
  int64_t last = -1;
  for (const auto& s : log.steps) last = std::max(last, s.step);
  return last;
}

class LiveDrill {
 public:
  LiveDrill(const DrillOptions& options, Progress* progress) : o_(options) { record_.progress = progress; }

  DrillOutcome run() {
    const auto start = std::chrono::steady_clock::now();
    Status s;
    try {
      s = run_all();
    } catch (const std::exception& e) {  // a malformed log or child output must not crash the drill
      s = Status::io_error(std::string("drill --live: ") + e.what());
    }
    for (auto& r : runs_)
      if (r) r->kill_and_reap();
    return record_.finish(s, seconds_since(start), identical_);
  }

 private:
  Status validate() const {
    if (o_.command.empty())
      return Status::invalid_argument(
          "drill `live_metrics` needs `command`: the program the live run runs, to resume it");
    if (!o_.config_path.empty() || !o_.inject.empty())
      return Status::invalid_argument(
          "`config_path` and `inject` drive the built-in workload; `live_metrics` resumes `command`");
    if (o_.save_at >= 0)
      return Status::invalid_argument(
          "`save_at` does not apply to `live_metrics` (the live run chose its checkpoints): "
          "give `live_checkpoint` PATH");
    if (o_.modes.size() != 1 || o_.modes[0] != KillMode::kAfterSave)
      return Status::invalid_argument(
          "`modes` does not apply to `live_metrics`: the live run is never killed");
    for (const auto& f : o_.faults) {
      if (!is_known_fault(f))
        return Status::invalid_argument("`faults`: unknown fault '" + f + "' (" + fault_names() + ")");
      if (is_storage_fault(f))
        return Status::invalid_argument(
            "`faults` " + f +
            " needs a drill from scratch: the drill mounts the checkpoint dir of a subject it starts through "
            "its fault file system from the first write, and a live run's dir is already being written by a "
            "process it did not start; drill the same program from scratch on a short run instead "
            "(ckptcheck drill --save-at N --faults " +
            f + " -- COMMAND), and keep --live for the copy faults");
    }
    return check_launcher_options(o_);
  }

  Status setup() {
    CKPT_RETURN_IF_ERROR(validate());
    DrillOutcome& out = record_.out;
    out.built_in = false;
    out.drill_mode = "live";
    out.config = {{"command", o_.command}, {"live_metrics", o_.live_metrics}};
    exe_ = o_.executable;
    if (exe_.empty()) {
      CKPT_ASSIGN_OR_RETURN(exe_, current_executable());
    }
    CKPT_ASSIGN_OR_RETURN(work_, make_scratch_directory(o_.work_dir, "ckptcheck-drill"));
    out.work_dir = work_;
    launcher_ = std::make_unique<ProgramLauncher>(o_, exe_, "");
    CKPT_RETURN_IF_ERROR(launcher_->prepare(work_));
    record_.phases_total = 5 + (runs_control() ? 1 : 0) + static_cast<long long>(o_.faults.size());
    return Status::ok();
  }

  // The checkpoint to resume from: the one asked for, or the newest announced one still on disk,
  // snapshotted at once. A checkpoint the run deletes (or still writes) meanwhile is passed over.
  Status take_snapshot() {
    record_.phase("snapshot of the live checkpoint");
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(o_.live_metrics));
    // Newest first. Without --checkpoint, one at the log's last step is passed over while an older
    // one exists: a finished run will never log the steps after it.
    const int64_t at = last_step(log);
    std::vector<CheckpointEvent> candidates;
    for (auto it = log.checkpoints.rbegin(); it != log.checkpoints.rend(); ++it)
      if (o_.live_checkpoint.empty() ? it->step < at : same_path(it->path, o_.live_checkpoint))
        candidates.push_back(*it);
    // A live run that has just announced its first checkpoint has logged no step after it yet:
    // then that one is the candidate, and the drill waits for the steps after it.
    if (candidates.empty() && o_.live_checkpoint.empty())
      for (auto it = log.checkpoints.rbegin(); it != log.checkpoints.rend(); ++it) candidates.push_back(*it);
    if (candidates.empty())
      return Status::not_found(
          o_.live_metrics + ": " +
          (o_.live_checkpoint.empty()
               ? std::string("announces no checkpoint yet (no {\"event\": \"checkpoint\"} line)")
               : "never announces --checkpoint " + o_.live_checkpoint));
    std::vector<std::string> passed_over;
    for (const CheckpointEvent& c : candidates) {
      auto snap = snapshot_checkpoint(c.path, work_ + "/snapshot");
      if (!snap.is_ok()) {
        passed_over.push_back("step " + std::to_string(c.step) + ": " + snap.status().message());
        std::error_code ec;
        fs::remove_all(work_ + "/snapshot", ec);
        continue;
      }
      checkpoint_ = c;
      snapshot_ = *snap;
      break;
    }
    if (snapshot_.path.empty())
      return Status::not_found(o_.live_metrics + ": no announced checkpoint could be snapshotted (" +
                               std::to_string(passed_over.size()) + " tried; newest: " + passed_over.front() +
                               ")");
    n_ = checkpoint_.step;
    // K: as asked, else the run's own save interval (so N+K is a step it checkpoints too).
    int64_t previous = -1, next = -1;
    for (const auto& e : log.checkpoints) {
      if (e.step < n_) previous = std::max(previous, e.step);
      if (e.step > n_ && (next < 0 || e.step < next)) next = e.step;
    }
    // The stale-file fault swaps in a file of the checkpoint before: snapshot it now, before the
    // run's retention deletes it.
    for (const auto& e : log.checkpoints)
      if (e.step == previous && std::count(o_.faults.begin(), o_.faults.end(), "stale-file") > 0) {
        auto older = snapshot_checkpoint(e.path, work_ + "/snapshot-older");
        if (older.is_ok()) older_ = {e.step, older->path};
      }
    // With one checkpoint announced so far, its step is the interval (a run saves at S, 2S, ...).
    k_ = o_.resume_steps > 0 ? o_.resume_steps : next > 0 ? next - n_ : previous >= 0 ? n_ - previous : n_;
    DrillOutcome& out = record_.out;
    out.save_at = n_;
    out.resume_steps = k_;
    out.live = {{"metrics", o_.live_metrics},
                {"checkpoint", checkpoint_.path},
                {"step", n_},
                {"passed_over", passed_over},
                {"snapshot",
                 {{"path", snapshot_.path},
                  {"files", snapshot_.files},
                  {"bytes", snapshot_.bytes},
                  {"hard_linked", snapshot_.linked},
                  {"copied", snapshot_.copied},
                  {"seconds", snapshot_.seconds}}}};
    record_.add_check({"live_checkpoint", "live", true,
                       "step " + std::to_string(n_) + " (" + checkpoint_.path + "), K=" + std::to_string(k_) +
                           "; " + std::to_string(snapshot_.files) + " file(s), " +
                           std::to_string(snapshot_.bytes) + " bytes snapshotted in " +
                           format_number(snapshot_.seconds) + " s (" + std::to_string(snapshot_.linked) +
                           " hard linked, " + std::to_string(snapshot_.copied) +
                           " copied), unchanged while taken" +
                           (passed_over.empty() ? ""
                                                : "; " + std::to_string(passed_over.size()) +
                                                      " newer one(s) passed over: " + passed_over.front()),
                       out.live});
    return Status::ok();
  }

  // The snapshot through the readers, and `verify` when ckptcheck wrote it.
  Result<bool> read_snapshot() {
    record_.phase("read the snapshot");
    bool usable = check_readable(record_, snapshot_.path, "live");
    std::error_code ec;
    if (usable && !fs::exists(fs::path(snapshot_.path) / "manifest.json", ec))
      check_resume_state(record_, snapshot_.path, "live");
    if (usable && fs::exists(fs::path(snapshot_.path) / "manifest.json", ec)) {
      double seconds = 0;
      CKPT_ASSIGN_OR_RETURN(usable, verify_in_child(record_, exe_, snapshot_.path, work_, "live",
                                                    o_.child_timeout_seconds, &seconds));
    }
    return usable;
  }

  ProgramRun run_of(const std::string& role, const std::string& dir, const std::string& resume) const {
    ProgramRun r;
    r.role = role;
    r.ckpt_dir = dir + "/ckpt";
    r.steps = n_ + k_;
    // Steps are absolute: an interval of N+K saves once, at N+K, unless one was asked for.
    r.save_every = o_.save_every > 0 ? o_.save_every : n_ + k_;
    r.metrics = dir + "/metrics.jsonl";
    r.resume = resume;
    return r;
  }

  Result<std::unique_ptr<RunningProgram>> start_resumed(const std::string& role, const std::string& dir) {
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    return launcher_->start(run_of(role, dir, snapshot_.path), dir, RunShape::kResumed);
  }

  // Waits for the live run to log step N+K (and, briefly, for its checkpoint of that step), then
  // takes the golden window N+1..N+K from its log. The log of a long run is large: while waiting
  // only the lines it appends are read; the whole log is parsed (strictly) once, at the end.
  Status wait_for_live_run() {
    record_.phase("waiting for the live run");
    const auto start = std::chrono::steady_clock::now();
    const auto nap = std::chrono::milliseconds(static_cast<int>(kLivePollSeconds * 1000));
    MetricsTail tail(o_.live_metrics);
    CheckpointEvent ignored;
    bool final_announced = tail.poll_for_checkpoint(n_ + k_, &ignored);
    LiveStallWatch stall(o_.live_metrics, o_.live_stall_seconds, n_, snapshot_.newest_mtime_ns);
    stall.observe(tail.last_step());
    while (tail.last_step() < n_ + k_) {
      // A run that crashed or stopped: its log no longer changes (live_stall.h).
      if (stall.stalled())
        return Status::io_error("the live run (" + o_.live_metrics +
                                ") is not advancing: " + stall.not_advancing_words(n_ + k_));
      if (seconds_since(start) > o_.wait_timeout_seconds)
        return Status::io_error("the live run (" + o_.live_metrics + ") is at step " +
                                std::to_string(tail.last_step()) + ": it did not reach step " +
                                std::to_string(n_ + k_) + " within " +
                                format_number(o_.wait_timeout_seconds) + " s (--wait-timeout)");
      if (record_.progress)
        record_.progress->update("drill: waiting for the live run, step",
                                 std::max<int64_t>(tail.last_step(), 0), n_ + k_);
      std::this_thread::sleep_for(nap);
      final_announced = tail.poll_for_checkpoint(n_ + k_, &ignored) || final_announced;
      stall.observe(tail.last_step());
    }
    const auto reached = std::chrono::steady_clock::now();
    while (!final_announced && tail.last_step() == n_ + k_ &&
           seconds_since(reached) < kFinalCheckpointGraceSeconds &&
           seconds_since(start) < o_.wait_timeout_seconds) {
      std::this_thread::sleep_for(nap);
      final_announced = tail.poll_for_checkpoint(n_ + k_, &ignored);
    }
    CKPT_ASSIGN_OR_RETURN(const MetricsLog log, read_metrics_log(o_.live_metrics));
    auto final_event = [&]() -> const CheckpointEvent* {
      for (const auto& e : log.checkpoints)
        if (e.step == n_ + k_) return &e;
      return nullptr;
    };
    waited_seconds_ = seconds_since(start);
    for (const auto& s : log.steps)
      if (s.step > n_ && s.step <= n_ + k_) golden_.push_back(s);
    record_.out.reference_steps = golden_;
    record_.out.live["waited_seconds"] = waited_seconds_;
    if (const CheckpointEvent* e = final_event()) {
      auto snap = snapshot_checkpoint(e->path, work_ + "/live-final");
      if (snap.is_ok()) {
        auto state = read_state_snapshot(snap->path);
        if (state.is_ok()) live_final_ = std::move(*state);
        record_.out.live["final_checkpoint"] = e->path;
        if (!state.is_ok()) live_final_note_ = "unreadable: " + state.status().message();
      } else {
        live_final_note_ = snap.status().message();
      }
    } else {
      live_final_note_ = "the live run announced no checkpoint of step " + std::to_string(n_ + k_);
    }
    return Status::ok();
  }

  // The resumed run: its exit, where it started, and its final checkpoint.
  Result<std::optional<MetricsLog>> finish_resumed(RunningProgram& run, const std::string& what,
                                                   const std::string& dir, RunTimeline* timeline,
                                                   RunWatch* watch) {
    const ChildExit e = launcher_->wait(run, what, dir + "/metrics.jsonl", record_.progress, n_ + k_);
    if (watch) *timeline = watch->stop();
    if (!e.ok()) {
      record_.add_check({"resumed_run",
                         "live",
                         false,
                         what + " failed (" + e.describe() + "): " + log_tail(dir + "/stderr.log"),
                         {{"exit", e.describe()}, {"resume", snapshot_.path}}});
      return std::optional<MetricsLog>();
    }
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(dir + "/metrics.jsonl", dir + "/ckpt"));
    return std::optional<MetricsLog>(std::move(log));
  }

  // The resumed run as the report's one mode (report.json's modes[0] and losses.resumed, the HTML's
  // resumed curve): a live drill kills nothing, so drill_report names it "live", not a kill mode.
  Status compare(const MetricsLog& resumed, std::optional<MetricsLog> control) {
    record_.out.modes.emplace_back();
    ModeOutcome* mode = &record_.out.modes.back();
    mode->resumed_from_step = n_;
    mode->resumed_steps = resumed.steps;
    Status s = compare_into(resumed, std::move(control), mode);
    mode->bit_identical = mode->compared && identical_;
    return s;
  }

  Status compare_into(const MetricsLog& resumed, std::optional<MetricsLog> control, ModeOutcome* mode) {
    record_.phase("compare with the live run");
    const int64_t first = resumed.steps.empty() ? -1 : resumed.steps.front().step;
    record_.add_check({"resumed_from",
                       "live",
                       first == n_ + 1,
                       resumed_from_words(fs::path(snapshot_.path).filename().string(), n_, first),
                       {{"expected_step", n_}, {"first_logged_step", first}, {"resume", snapshot_.path}}});
    auto resumed_final = announced_snapshot(resumed, n_ + k_, "the resumed run");
    std::optional<StateSnapshot> control_state;
    if (control) {
      auto control_final = announced_snapshot(*control, n_ + k_, "the control run");
      if (control_final.is_ok()) control_state = std::move(*control_final);
      envelope_ =
          measure_noise(record_, resumed.steps, resumed_final.is_ok() ? *resumed_final : StateSnapshot{},
                        control->steps, control_state ? *control_state : StateSnapshot{}, o_.control_multiple,
                        "two resumed runs from one snapshot");
    }
    ResumeComparison c;
    c.golden_steps = &golden_;
    c.tolerance = o_.tolerance;
    c.envelope = control ? &envelope_ : nullptr;
    c.expected_steps = k_;
    // Resumed on another world size than the live run's, the control (at the resumed run's) decides
    // what the resumed run must hold. Only then: it is a resumed run too, so at the live run's own
    // world size it would share a restore bug that loses state instead of showing it.
    if (changes_world_size(o_) && control_state) c.control_state = &*control_state;
    c.resumed_world_size = resumed_world_size(o_);
    c.control_run = "a second resumed run";
    const size_t first_failure = record_.out.failures.size();
    identical_ = check_metrics(record_, "live", c, resumed.steps);
    record_.add_check({"final_checkpoint_step",
                       "live",
                       resumed_final.is_ok(),
                       resumed_final.is_ok() ? "resumed run's final checkpoint " + resumed_final->path
                                             : resumed_final.status().message(),
                       {{"step", n_ + k_}}});
    if (!resumed_final.is_ok()) return Status::ok();
    if (!live_final_) {
      identical_ = false;  // not proven: only the metrics were compared
      mode->compared = true;
      record_.add_check({"final_state",
                         "live",
                         true,
                         "not compared (" + live_final_note_ + "): the metrics are the golden values",
                         {{"compared", false}, {"why", live_final_note_}}});
      return Status::ok();
    }
    identical_ = check_final_state(record_, "live", c, *live_final_, std::move(*resumed_final), first_failure,
                                   &mode->components) &&
                 identical_;
    mode->compared = true;
    return Status::ok();
  }

  // Across world sizes the control is what says which state a run at the resumed world size holds.
  bool runs_control() const { return o_.control || changes_world_size(o_); }

  Status run_faults() {
    if (o_.faults.empty()) return Status::ok();
    const CheckpointEvent& older = older_;  // already a snapshot, or none
    for (const auto& fault : o_.faults) {
      record_.phase("fault " + fault);
      const std::string dir = work_ + "/faults/" + fault;
      CKPT_RETURN_IF_ERROR(make_directory(dir));
      std::string copy;
      CKPT_ASSIGN_OR_RETURN(const std::string damage,
                            damage_checkpoint_copy(fault, {n_, snapshot_.path}, older, dir, &copy));
      if (damage.empty()) {
        record_.add_check(fault_not_applicable(fault, fault == "stale-file"
                                                          ? "no earlier checkpoint of the live run is on disk"
                                                          : "the checkpoint is a single file"));
        continue;
      }
      const ProgramRun run = run_of("resumed", dir, copy);
      CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child,
                            launcher_->start(run, dir, RunShape::kResumed));
      const ChildExit e = launcher_->wait(*child, "fault " + fault, run.metrics, record_.progress, n_ + k_);
      // A fault run that resumed from an older step than N (a stale file of the checkpoint before)
      // logs steps before N+1 too: they are held against the live log's own, as a drill from
      // scratch holds them against its reference, so an exact match reads silent-match.
      CKPT_ASSIGN_OR_RETURN(const std::vector<StepRecord> fault_golden,
                            golden_from(first_step_of(run.metrics)));
      FaultGolden golden;
      golden.steps = &fault_golden;
      golden.name = "the live run";
      golden.final_state = live_final_ ? &*live_final_ : nullptr;
      golden.final_step = n_ + k_;
      golden.tolerance = o_.tolerance;
      record_fault_run(record_, fault, damage, e, run.metrics, run.ckpt_dir, dir + "/stderr.log", golden);
    }
    return Status::ok();
  }

  // The first step a run logged (a metrics file that is unreadable or empty: N+1).
  int64_t first_step_of(const std::string& metrics) const {
    auto log = read_metrics_log(metrics);
    if (!log.is_ok() || log->steps.empty()) return n_ + 1;
    int64_t first = log->steps.front().step;
    for (const auto& s : log->steps) first = std::min(first, s.step);
    return first;
  }

  // The live log's steps from `first` to N+K: the golden window N+1..N+K, read again from the log
  // only when a run started before it.
  Result<std::vector<StepRecord>> golden_from(int64_t first) const {
    if (first > n_) return golden_;
    CKPT_ASSIGN_OR_RETURN(const MetricsLog log, read_metrics_log(o_.live_metrics));
    std::vector<StepRecord> steps;
    for (const auto& s : log.steps)
      if (s.step >= first && s.step <= n_ + k_) steps.push_back(s);
    return steps;
  }

  // What the drill measured, in the report's measurements shape: null where nothing was measured.
  void record_measurements(const RunTimeline& resumed) {
    std::optional<double> restore, resume;
    for (const auto& line : resumed.lines) {
      if (!line.checkpoint && !restore) restore = line.seconds;
      resume = line.seconds;
    }
    auto value = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    const bool sampled = resumed.rss.samples > 0;
    record_.out.measured = {
        {"timings",
         {{"snapshot_seconds", snapshot_.seconds},
          {"restore_seconds", value(restore)},
          {"resume_seconds", value(resume)},
          {"live_wait_seconds", waited_seconds_},
          {"checkpoint_bytes", snapshot_.bytes}}},
        {"memory", {{"peak_rss_bytes", sampled ? nlohmann::json(resumed.rss.peak_bytes) : nlohmann::json()}}},
        {"sources",
         {{"snapshot_seconds", "measured: hard-linking (or copying) the live checkpoint into the work dir"},
          {"restore_seconds",
           restore ? "measured: from the relaunch to the resumed run's first logged step" : "not measured"},
          {"resume_seconds",
           resume ? "measured: from the relaunch to the resumed run's last logged line" : "not measured"},
          {"live_wait_seconds", "measured: waiting for the live run to reach step N+K"},
          {"checkpoint_bytes", "measured: bytes of the snapshotted checkpoint's files"},
          {"peak_rss_bytes",
           sampled ? "measured: the resumed run's process tree, sampled from /proc" : "not measured"}}}};
  }

  Status run_all() {
    CKPT_RETURN_IF_ERROR(setup());
    CKPT_RETURN_IF_ERROR(take_snapshot());
    CKPT_ASSIGN_OR_RETURN(const bool usable, read_snapshot());
    if (!usable) return Status::ok();  // the drill has its answer: the checkpoint itself is bad
    // The resumed run (and the control) start now, and run while the live run catches up to N+K.
    record_.phase("resumed run");
    CKPT_ASSIGN_OR_RETURN(runs_[0], start_resumed("resumed", work_ + "/resumed"));
    RunWatch watch(runs_[0]->local_pid(), work_ + "/resumed/metrics.jsonl");
    if (runs_control()) {
      CKPT_ASSIGN_OR_RETURN(runs_[1], start_resumed("control", work_ + "/control"));
    }
    CKPT_RETURN_IF_ERROR(wait_for_live_run());
    RunTimeline timeline;
    CKPT_ASSIGN_OR_RETURN(auto resumed,
                          finish_resumed(*runs_[0], "resumed run", work_ + "/resumed", &timeline, &watch));
    std::optional<MetricsLog> control;
    if (runs_control()) {
      record_.phase("control run");
      RunTimeline ignored;
      CKPT_ASSIGN_OR_RETURN(control,
                            finish_resumed(*runs_[1], "control run", work_ + "/control", &ignored, nullptr));
      if (!control) return Status::ok();
    }
    record_measurements(timeline);
    if (!resumed) return Status::ok();
    CKPT_RETURN_IF_ERROR(compare(*resumed, std::move(control)));
    return run_faults();
  }

  const DrillOptions& o_;
  DrillRecord record_;
  std::string exe_, work_;
  std::unique_ptr<ProgramLauncher> launcher_;  // before the runs: a Slurm allocation outlives them
  std::unique_ptr<RunningProgram> runs_[2];    // the resumed run and the control
  CheckpointEvent checkpoint_, older_;
  LiveSnapshot snapshot_;
  int64_t n_ = 0, k_ = 0;
  std::vector<StepRecord> golden_;
  std::optional<StateSnapshot> live_final_;
  std::string live_final_note_;
  NoiseEnvelope envelope_;
  bool identical_ = false;
  double waited_seconds_ = 0;
};

}  // namespace

DrillOutcome run_live_drill(const DrillOptions& options, Progress* progress) {
  return LiveDrill(options, progress).run();
}

}  // namespace ckpt
