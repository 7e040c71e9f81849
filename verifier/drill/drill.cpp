#include "verifier/drill/drill.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/progress.h"
#include "base/seconds_since.h"
#include "fixtures/pilot_config.h"
#include "formats/native_shard.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/drill/checkpoint_checks.h"
#include "verifier/drill/drill_plan.h"
#include "verifier/drill/drill_record.h"
#include "verifier/drill/fault_catalogue.h"
#include "verifier/drill/fault_drill.h"
#include "verifier/drill/held_kill_point.h"
#include "verifier/drill/live_drill.h"
#include "verifier/drill/missed_kill_point.h"
#include "verifier/drill/pilot_rules.h"
#include "verifier/drill/program_contract.h"
#include "verifier/drill/program_launcher.h"
#include "verifier/drill/resume_comparison.h"
#include "verifier/drill/run_measurements.h"
#include "verifier/drill/save_watch.h"
#include "verifier/drill/storage_fault_drill.h"
#include "verifier/process/child_process.h"
#include "verifier/process/program_path.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

const char* kill_mode_name(KillMode mode) {
  return mode == KillMode::kAfterSave ? "after-save" : "during-save";
}

bool parse_kill_modes(const std::string& name, std::vector<KillMode>* out) {
  if (name == "after-save")
    *out = {KillMode::kAfterSave};
  else if (name == "during-save")
    *out = {KillMode::kDuringSave};
  else if (name == "both")
    *out = {KillMode::kAfterSave, KillMode::kDuringSave};
  else
    return false;
  return true;
}

bool is_known_drill_inject(const std::string& name) {
  static const std::set<std::string> known = {"drop-optimizer-state", "reset-scheduler",   "skip-rng-restore",
                                              "skip-data-position",   "reset-loss-scaler", kStaleShardInject};
  return known.count(name) > 0;
}

const char* fault_outcome_name(FaultOutcome outcome) {
  switch (outcome) {
    case FaultOutcome::kRefused: return "refused";
    case FaultOutcome::kSilentDivergence: return "silent-divergence";
    case FaultOutcome::kSilentMatch: return "silent-match";
    case FaultOutcome::kSurvived: return "survived";
    case FaultOutcome::kFellBack: return "fell-back";
    case FaultOutcome::kLost: return "lost";
    case FaultOutcome::kAnnouncedIncomplete: return "announced-incomplete";
    case FaultOutcome::kFreshStart: return "fresh-start";
    case FaultOutcome::kResumedUnreadable: return "resumed-unreadable";
    case FaultOutcome::kRelaunchFailed: return "relaunch-failed";
    case FaultOutcome::kNotExercised: return "not-exercised";
  }
  return "?";
}

bool is_known_fault(const std::string& name) {
  return find_fault(name) != nullptr;
}

int subject_world_size(const DrillOptions& o) {
  const int nodes = o.launcher == "slurm" ? std::max(o.nodes, 1) : 1;
  return nodes * std::max(o.nproc, 1);
}

int resumed_world_size(const DrillOptions& o) {
  const int nodes = o.launcher == "slurm" ? (o.resume_nodes > 0 ? o.resume_nodes : std::max(o.nodes, 1)) : 1;
  return nodes * (o.resume_nproc > 0 ? o.resume_nproc : std::max(o.nproc, 1));
}

bool changes_world_size(const DrillOptions& o) {
  return subject_world_size(o) != resumed_world_size(o);
}

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxSummaryBytes = 64u << 20;

Result<LoadedTensor> read_eval_logits(const std::string& eval_dir) {
  const std::string path = eval_dir + "/logits.cks";
  CKPT_ASSIGN_OR_RETURN(auto file, open_native_shard_file(path));
  if (file->chunks().size() != 1) return Status::corruption(path + ": expected one tensor (eval.logits)");
  const ChunkInfo& c = file->chunks()[0];
  CKPT_ASSIGN_OR_RETURN(auto bytes, read_whole_chunk(*file, 0));
  return LoadedTensor{c.name, c.component, c.dtype, c.shape, std::move(bytes)};
}

Result<double> eval_mean_loss(const nlohmann::json& summary, const std::string& run) {
  if (!summary.contains("eval") || !summary["eval"].is_object() || !summary["eval"].contains("mean_loss") ||
      !summary["eval"]["mean_loss"].is_number())
    return Status::corruption(run + " summary: no eval.mean_loss");
  return summary["eval"]["mean_loss"].get<double>();
}

// The drill from scratch: it composes the phases (drill_plan, program_launcher, checkpoint_checks,
// resume_comparison, fault_drill) around its own runs: a reference to N+K, subjects killed at N.
class ResumeDrill {
 public:
  ResumeDrill(const DrillOptions& options, Progress* progress) : o_(options) { record_.progress = progress; }

  DrillOutcome run() {
    const auto start = std::chrono::steady_clock::now();
    Status s;
    try {
      s = run_all();
    } catch (const std::exception& e) {  // a malformed child output must not crash the drill
      s = Status::io_error(std::string("drill: ") + e.what());
    }
    if (reference_) reference_->kill_and_reap();
    if (control_child_) control_child_->kill_and_reap();
    bool identical = !record_.out.modes.empty();
    for (const auto& m : record_.out.modes) identical = identical && m.compared && m.bit_identical;
    return record_.finish(s, seconds_since(start), identical);
  }

 private:
  bool built_in() const { return o_.command.empty(); }
  int64_t steps() const { return plan_.n + plan_.k; }

  Status setup() {
    DrillOutcome& out = record_.out;
    out.built_in = built_in();
    int64_t default_n = -1;
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(PilotConfig config, load_pilot_config(o_.config_path));
      if (!o_.long_run_path.empty()) {
        CKPT_ASSIGN_OR_RETURN(PilotConfig long_run, load_pilot_config(o_.long_run_path));
        CKPT_RETURN_IF_ERROR(check_pilot_rules(config, long_run));
      }
      out.config = config.resolved();
      default_n = config.steps / 2;
      std::error_code ec;
      config_path_ = fs::absolute(o_.config_path, ec).string();
    } else {
      out.config = {{"command", o_.command}};
    }
    CKPT_ASSIGN_OR_RETURN(plan_, plan_drill(o_, default_n));
    out.save_at = plan_.n;
    out.resume_steps = plan_.k;
    // A program that cannot be started would only exit 127, without a word: name it now. (A
    // Slurm step runs it on other nodes, whose files this one cannot see; `launch`, which starts
    // the ranks, names it itself.)
    if (!built_in() && o_.launcher != "slurm" && o_.nproc == 0) {
      auto program = find_program(o_.command[0]);
      if (!program.is_ok())
        return Status::invalid_argument("command not found: " + program.status().message());
    }
    exe_ = o_.executable;
    if (exe_.empty()) {
      CKPT_ASSIGN_OR_RETURN(exe_, current_executable());
    }
    // The storage faults need FUSE: say so before anything runs.
    faultfs_program_ = faultfs_program_beside(exe_);
    if (std::any_of(o_.faults.begin(), o_.faults.end(), is_storage_fault))
      CKPT_RETURN_IF_ERROR(check_storage_faults_usable(faultfs_program_));
    held_kill_point_unavailable_ = held_kill_point_unavailable(o_, faultfs_program_);
    // A fresh dir per drill: a resume must never find a checkpoint of an earlier drill.
    CKPT_ASSIGN_OR_RETURN(work_, make_scratch_directory(o_.work_dir, "ckptcheck-drill"));
    out.work_dir = work_;
    launcher_ = std::make_unique<ProgramLauncher>(o_, exe_, config_path_);
    CKPT_RETURN_IF_ERROR(launcher_->prepare(work_));
    record_.phases_total = 1 + (plan_.control ? 1 : 0) + static_cast<long long>(o_.modes.size()) * 4 +
                           static_cast<long long>(o_.faults.size()) +
                           2 * std::count_if(o_.faults.begin(), o_.faults.end(), is_storage_fault);
    // Recorded once a subject has kept the contract up to its kill point (kill_subject): a program
    // that never did gets no "ok contract" line above the reason.
    contract_check_ =
        DrillCheck{"contract",
                   "",
                   true,
                   std::string(built_in() ? "built-in workload" : "program `" + o_.command[0] + "`") +
                       ": N=" + std::to_string(plan_.n) + " K=" + std::to_string(plan_.k) + ", save every " +
                       std::to_string(plan_.save_every),
                   {{"save_at", plan_.n},
                    {"resume_steps", plan_.k},
                    {"save_every", plan_.save_every},
                    {"steps", steps()}}};
    if (o_.nproc > 0 || o_.resume_nproc > 0 || launcher_->slurm()) add_world_sizes_check();
    return Status::ok();
  }

  void add_world_sizes_check() {
    const int subject = subject_world_size(o_), resumed = resumed_world_size(o_);
    const SlurmAllocation* job = launcher_->allocation();
    const std::string on = job ? " through Slurm (job " + std::to_string(job->job_id()) +
                                     (job->owned() ? ", allocated by the drill" : "") + ")"
                               : "";
    const int nodes = job ? std::max(o_.nodes, 1) : 1;
    record_.add_check(
        {"world_sizes",
         "",
         true,
         "subject and reference " + std::to_string(subject) + " rank(s), resumed " + std::to_string(resumed) +
             " rank(s)" + on + "; tolerance rtol " + std::to_string(o_.tolerance.rtol) + " atol " +
             std::to_string(o_.tolerance.atol) +
             (changes_world_size(o_) ? " (across world sizes: the control run at " + std::to_string(resumed) +
                                           " rank(s) decides what state the resumed run must hold)"
                                     : ""),
         {{"subject_ranks", subject},
          {"resumed_ranks", resumed},
          {"launcher", o_.launcher},
          {"nodes", nodes},
          {"resumed_nodes", job && o_.resume_nodes > 0 ? o_.resume_nodes : nodes},
          {"slurm_job", job ? nlohmann::json(job->job_id()) : nlohmann::json()},
          {"rtol", o_.tolerance.rtol},
          {"atol", o_.tolerance.atol}}});
  }

  ProgramRun run_of(const std::string& role, const std::string& dir, const std::string& resume = "") const {
    ProgramRun r;
    r.role = role;
    r.ckpt_dir = dir + "/ckpt";
    r.steps = steps();
    r.save_every = plan_.save_every;
    r.metrics = dir + "/metrics.jsonl";
    r.resume = resume;
    return r;
  }

  Status start_reference() {
    const std::string dir = work_ + "/reference";
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    CKPT_ASSIGN_OR_RETURN(reference_,
                          launcher_->start(run_of("reference", dir), dir, RunShape::kSubject,
                                           built_in() ? std::vector<std::string>{"--measure-memory"}
                                                      : std::vector<std::string>{}));
    reference_watch_ = std::make_unique<RunWatch>(reference_->local_pid(), dir + "/metrics.jsonl");
    return Status::ok();
  }

  Status finish_reference() {
    if (reference_done_) return Status::ok();
    record_.phase("reference run");
    const std::string dir = work_ + "/reference";
    CKPT_RETURN_IF_ERROR(launcher_->wait_ok(*reference_, "reference run", dir, record_.progress, steps()));
    reference_timeline_ = reference_watch_->stop();
    reference_done_ = true;
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(dir + "/metrics.jsonl", dir + "/ckpt"));
    record_.out.reference_steps = log.steps;
    CKPT_ASSIGN_OR_RETURN(reference_snapshot_, announced_snapshot(log, steps(), "the reference run"));
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(record_.out.reference_summary,
                            read_json_file(dir + "/summary.json", kMaxSummaryBytes));
      CKPT_ASSIGN_OR_RETURN(reference_logits_, read_eval_logits(dir + "/eval"));
      auto manifest = read_manifest_file(reference_snapshot_.path);
      if (manifest.is_ok()) record_.out.pins = manifest->pins;
    }
    return Status::ok();
  }

  // A second uninterrupted run (with the resumed run's world size): how far two runs of this
  // program differ with no restart at all.
  Status run_control() {
    record_.phase("control run");
    const std::string dir = work_ + "/control";
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    CKPT_ASSIGN_OR_RETURN(control_child_, launcher_->start(run_of("control", dir), dir, RunShape::kResumed));
    CKPT_RETURN_IF_ERROR(launcher_->wait_ok(*control_child_, "control run", dir, record_.progress, steps()));
    control_child_.reset();
    CKPT_RETURN_IF_ERROR(finish_reference());
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(dir + "/metrics.jsonl", dir + "/ckpt"));
    CKPT_ASSIGN_OR_RETURN(StateSnapshot control, announced_snapshot(log, steps(), "the control run"));
    control_snapshot_ = std::move(control);
    envelope_ = measure_noise(record_, record_.out.reference_steps, reference_snapshot_, log.steps,
                              *control_snapshot_, o_.control_multiple, "two uninterrupted runs");
    return Status::ok();
  }

  // Every complete line the reference has written so far, then the subject's: a program whose
  // lines break the contract is told so at the first bad line of the first run that wrote it,
  // before any later run is blamed for the same line.
  Status check_metrics_so_far(const std::string& subject_dir) const {
    const std::string reference_dir = work_ + "/reference";
    auto reference = read_metrics_log(reference_dir + "/metrics.jsonl", reference_dir + "/ckpt", true);
    if (!reference.is_ok() && reference.status().code() == StatusCode::kCorruption) return reference.status();
    auto subject = read_metrics_log(subject_dir + "/metrics.jsonl", subject_dir + "/ckpt");
    if (!subject.is_ok() && subject.status().code() == StatusCode::kCorruption) return subject.status();
    return Status::ok();
  }

  // The subject is SIGKILLed right after its step-N checkpoint event, or as soon as it starts
  // writing the step-N checkpoint; returns the checkpoint the relaunch resumes from: the last
  // one the subject announced, as a real relaunch would take. nullopt when a check failed and
  // nothing is left to resume.
  Result<std::optional<CheckpointEvent>> kill_subject(KillMode mode, const std::string& dir) {
    const int64_t n = plan_.n;
    const std::string mode_name = kill_mode_name(mode);
    record_.phase("subject (" + mode_name + ")");
    const ProgramRun run = run_of("subject", dir);
    StepObserver show;
    if (record_.progress && record_.progress->enabled()) {
      const std::string label = "drill: subject (" + mode_name + "), step";
      show = [this, label, n](int64_t step) { record_.progress->update(label, step, n); };
    }
    WatchOutcome w;
    std::string subject_label;
    // A program of a few milliseconds a step can finish its run between the kill point and the
    // SIGKILL on a loaded machine (exit 0, nothing killed): that is no finding about the program, so
    // the subject is started again, from an empty dir, up to kSubjectAttempts times.
    constexpr int kSubjectAttempts = 3;
    int attempts = 1;
    // Where it can, the file system holds the kill point (held_kill_point.h): then no program
    // outruns the kill, and the restarts below never happen.
    const bool after_save = mode == KillMode::kAfterSave;
    const int64_t point = after_save ? n : n - plan_.save_every;
    std::string held_why_not = held_kill_point_unavailable_;
    for (int attempt = 1;; ++attempt) {
      attempts = attempt;
      std::unique_ptr<HeldKillPoint> held;
      if (held_why_not.empty()) {
        auto mounted = HeldKillPoint::mount(faultfs_program_, dir);
        if (mounted.is_ok()) {
          held = std::move(*mounted);
          CKPT_RETURN_IF_ERROR(held->arm(run, after_save, point));
        } else {
          held_why_not = "cannot mount ckptcheck-faultfs: " + mounted.status().message();
        }
      }
      CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> started,
                            launcher_->start(run, dir, RunShape::kSubject));
      RunningProgram& subject = *started;
      subject_label = subject.label();
      if (held) {
        CKPT_ASSIGN_OR_RETURN(
            w, held->kill_when_held(subject, run, after_save, point, o_.child_timeout_seconds, show));
        CKPT_RETURN_IF_ERROR(held->finish());
      } else if (after_save) {
        w = kill_after_checkpoint(subject, run.metrics, run.ckpt_dir, n, o_.child_timeout_seconds, show);
      } else {
        CKPT_ASSIGN_OR_RETURN(
            w, kill_during_save(subject, run.metrics, run.ckpt_dir, point, o_.child_timeout_seconds, show));
      }
      const bool outran_the_kill = w.triggered && w.exit.ok();
      if (!outran_the_kill || attempt == kSubjectAttempts) break;
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      CKPT_RETURN_IF_ERROR(make_directory(dir));
    }
    const Status metrics_kept = check_metrics_so_far(dir);
    if (!w.triggered) {
      MissedKillPoint missed;
      missed.bad_metrics = metrics_kept.is_ok() ? "" : metrics_kept.message();
      missed.mode = mode_name;
      missed.save_at = n;
      missed.steps = run.steps;
      missed.save_every = run.save_every;
      missed.metrics = run.metrics;
      missed.ckpt_dir = run.ckpt_dir;
      missed.stderr_log = dir + "/stderr.log";
      missed.exit = w.exit;
      missed.timeout_seconds = o_.child_timeout_seconds;
      return Status::io_error(explain_missed_kill_point(missed));
    }
    CKPT_RETURN_IF_ERROR(metrics_kept);
    if (after_save && held_why_not.empty()) {
      // Killed while the file system held its step-N event, the subject's log must end there: lines
      // past it mean they reached the file long after they happened (a buffered log, written at
      // exit), and the request held was not the checkpoint event at all. (Unheld, ranks that die a
      // moment after their launcher may log a step more: no finding.)
      auto so_far = read_metrics_log(run.metrics, run.ckpt_dir);
      int64_t last = -1;
      if (so_far.is_ok()) {
        for (const auto& line : so_far->steps) last = std::max(last, line.step);
        for (const auto& c : so_far->checkpoints) last = std::max(last, c.step);
      }
      if (last > n) {
        return Status::io_error(
            "the subject (" + mode_name + ") was killed at its step-" + std::to_string(n) +
            " checkpoint event, but its metrics log runs to step " + std::to_string(last) + " (" +
            run.metrics +
            "): its lines reach the file long after they happen (a buffered log, written at exit), so no "
            "kill can land at the checkpoint; flush the metrics file after each line (docs/drill.md, the "
            "contract; ckptcheck.contract does)");
      }
    }
    if (contract_check_) {
      record_.out.checks.insert(record_.out.checks.begin(), std::move(*contract_check_));
      contract_check_.reset();
    }
    const std::string what = mode == KillMode::kAfterSave
                                 ? "checkpoint event of step " + std::to_string(n) + " (" + w.event.path + ")"
                                 : describe_save_trigger(w) + " in the checkpoint dir";
    DrillCheck c{"subject_killed", mode_name, w.exit.killed_by(SIGKILL), "", {}};
    c.detail = "SIGKILLed at the " + what + ": " + w.exit.describe() +
               (launcher_->slurm() ? " (" + subject_label + ")" : "");
    c.numbers = {{"step", n},
                 {"trigger", what},
                 {"signal", w.exit.signal},
                 {"exit", w.exit.describe()},
                 {"starts", attempts},
                 {"held_by_faultfs", held_why_not.empty()}};
    if (!held_why_not.empty()) c.numbers["not_held_because"] = held_why_not;
    if (attempts > 1) {
      c.detail += " (started " + std::to_string(attempts) +
                  " times: the run finished before the SIGKILL landed " + std::to_string(attempts - 1) +
                  "x, a fast program on a loaded machine)";
    }
    if (!c.passed) {
      return Status::io_error("subject did not die of SIGKILL: " + w.exit.describe() + " (started " +
                              std::to_string(attempts) +
                              " times; each run finished before the kill landed: give each step some "
                              "milliseconds more, or drill on a quieter machine)");
    }
    record_.add_check(c);
    if (mode == KillMode::kAfterSave) {
      // The contract says "after each checkpoint is durable": an event read before its file
      // exists is a checkpoint a crash at that moment would resume from, and find missing.
      record_.add_check({"checkpoint_announced",
                         mode_name,
                         w.event_path_existed,
                         w.event_path_existed
                             ? "step " + std::to_string(n) + " announced as " + w.event.path + ", on disk"
                             : "announced at step " + std::to_string(n) + " as " + w.event.path +
                                   ", not on disk when the event was read: log the event after the save "
                                   "returns",
                         {{"step", n}, {"path", w.event.path}, {"on_disk", w.event_path_existed}}});
      if (!w.event_path_existed) return std::optional<CheckpointEvent>();
      return std::optional<CheckpointEvent>(w.event);
    }
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(run.metrics, run.ckpt_dir));
    if (log.checkpoints.empty())
      return Status::io_error("subject (during-save) announced no checkpoint before it was killed");
    const CheckpointEvent last = log.checkpoints.back();
    const int64_t last_step = log.steps.empty() ? -1 : log.steps.back().step;
    // Exercised: the run had trained step N and had not announced its checkpoint when it died.
    torn_exercised_ = last.step < n && last_step >= n;
    DrillCheck landed{"kill_landed_during_save",
                      mode_name,
                      torn_exercised_,
                      "",
                      {{"save_completed_first", last.step >= n},
                       {"last_logged_step", last_step},
                       {"last_announced_step", last.step},
                       {"trigger", w.created}}};
    landed.skipped = !torn_exercised_;
    if (torn_exercised_)
      landed.detail = "killed inside the step-" + std::to_string(n) + " save (" + w.created +
                      " created, the checkpoint never announced)";
    else if (last.step >= n)
      landed.detail = "the step-" + std::to_string(last.step) +
                      " save completed before the kill landed (faster than a kill, or begun where "
                      "the watch of the checkpoint dir cannot see): the torn-save case was not exercised";
    else
      landed.detail = "the kill landed at step " + std::to_string(last_step) + ", before the step-" +
                      std::to_string(n) + " save began (" + w.created +
                      " was created in the checkpoint dir first): the torn-save case was not exercised";
    record_.add_check(landed);
    // A subject that trained to its end before the kill landed (a kill through Slurm takes a few
    // tenths of a second) announced its final checkpoint last: a relaunch from it has no step left
    // to train and nothing to compare, so resume from the last checkpoint announced before the end.
    for (auto it = log.checkpoints.rbegin(); it != log.checkpoints.rend(); ++it)
      if (it->step < steps()) return std::optional<CheckpointEvent>(*it);
    return std::optional<CheckpointEvent>(last);
  }

  // After a kill during the save: the torn step-N dir is uncommitted and `latest` skips it.
  Status check_torn_save(const std::string& ckpt_root) {
    const int64_t n = plan_.n;
    const CheckpointListing listing = list_checkpoints(ckpt_root);
    bool step_n_committed = false;
    for (const auto& d : listing.committed)
      if (fs::path(d).filename() == step_dir_name(n)) step_n_committed = true;
    DrillCheck torn{"torn_checkpoint_uncommitted",
                    "during-save",
                    !listing.uncommitted.empty() && !step_n_committed,
                    "",
                    {{"uncommitted", listing.uncommitted}, {"committed", listing.committed}}};
    torn.detail = std::to_string(listing.uncommitted.size()) + " uncommitted dir(s), step " +
                  std::to_string(n) + (step_n_committed ? " committed (wrong)" : " not committed");
    record_.add_check(torn);
    auto latest = resolve_latest_checkpoint(ckpt_root);
    const std::string want = step_dir_name(n - plan_.save_every);
    const std::string got =
        latest.is_ok() ? fs::path(*latest).filename().string() : latest.status().message();
    record_.add_check({"latest_skips_torn",
                       "during-save",
                       got == want,
                       "resolve_latest_checkpoint -> " + got + ", expected " + want,
                       {{"expected_step", n - plan_.save_every}, {"resolved", got}}});
    return Status::ok();
  }

  // Invariant: this only ever touches the drill's own scratch checkpoint under work_, never a
  // user's checkpoint: it is the stale-shard negative control (a shard left over from an older
  // save, with the right name but the wrong bytes).
  Status plant_stale_shard(const std::string& ckpt_root) {
    const std::string old_dir = ckpt_root + "/" + step_dir_name(plan_.n - plan_.save_every);
    const std::string new_dir = ckpt_root + "/" + step_dir_name(plan_.n);
    CKPT_ASSIGN_OR_RETURN(Manifest old_m, read_manifest_file(old_dir));
    CKPT_ASSIGN_OR_RETURN(Manifest new_m, read_manifest_file(new_dir));
    if (old_m.shards.empty() || new_m.shards.empty())
      return Status::corruption(new_dir + ": manifest lists no shards");
    const std::string from = old_dir + "/" + old_m.shards[0].path, to = new_dir + "/" + new_m.shards[0].path;
    std::error_code ec;
    fs::permissions(to, fs::perms::owner_write, fs::perm_options::add, ec);
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::io_error("stale-shard: copy " + from + " -> " + to + ": " + ec.message());
    record_.add_check({"stale_shard_planted",
                       "after-save",
                       true,
                       "copied " + from + " over " + to,
                       {{"from", from}, {"to", to}}});
    return Status::ok();
  }

  // A fresh process resumed from `from`; false (a failure recorded) when it does not finish.
  Result<bool> resume(KillMode mode, const std::string& dir, const CheckpointEvent& from, ModeOutcome* m) {
    record_.phase(std::string("resume (") + kill_mode_name(mode) + ")");
    std::vector<std::string> extra;
    if (!o_.inject.empty() && o_.inject != kStaleShardInject) extra = {"--inject", o_.inject};
    ProgramRun run = run_of("resumed", dir + "/resumed", from.path);
    // --relaunch-dir same: the relaunch finds the subject's checkpoint dir as the kill left it, as a
    // restarted job does; fresh: a new, empty one.
    if (o_.relaunch_dir == "same") run.ckpt_dir = dir + "/ckpt";
    CKPT_RETURN_IF_ERROR(make_directory(dir + "/resumed"));
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child,
                          launcher_->start(run, dir + "/resumed", RunShape::kResumed, extra));
    RunWatch watch(child->local_pid(), run.metrics);
    const ChildExit e = launcher_->wait(*child, std::string("resumed run (") + kill_mode_name(mode) + ")",
                                        run.metrics, record_.progress, steps());
    if (e.ok()) resumed_timelines_.push_back(watch.stop());
    if (!e.ok()) {
      record_.add_check(
          {"resumed_run",
           kill_mode_name(mode),
           false,
           "the resumed run failed (" + e.describe() + "): " + log_tail(dir + "/resumed/stderr.log"),
           {{"exit", e.describe()}, {"resume", from.path}}});
      return false;
    }
    CKPT_ASSIGN_OR_RETURN(resumed_log_, read_metrics_log(run.metrics, run.ckpt_dir));
    m->resumed_steps = resumed_log_.steps;
    m->resumed_from_step = from.step;
    const int64_t first = m->resumed_steps.empty() ? -1 : m->resumed_steps.front().step;
    record_.add_check({"resumed_from",
                       kill_mode_name(mode),
                       first == from.step + 1,
                       resumed_from_words(fs::path(from.path).filename().string(), from.step, first),
                       {{"expected_step", from.step}, {"first_logged_step", first}, {"resume", from.path}}});
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(m->resumed_summary,
                            read_json_file(dir + "/resumed/summary.json", kMaxSummaryBytes));
      const auto& s = m->resumed_summary;
      const int64_t restored = s.contains("restored_step") && s["restored_step"].is_number_integer()
                                   ? s["restored_step"].get<int64_t>()
                                   : -1;
      record_.add_check(
          {"restored_step",
           kill_mode_name(mode),
           restored == from.step,
           "restored step " + std::to_string(restored) + ", expected " + std::to_string(from.step),
           {{"expected_step", from.step},
            {"restored_step", restored},
            {"restore_seconds", s.contains("restore_seconds") ? s["restore_seconds"] : nlohmann::json()}}});
    }
    return true;
  }

  ResumeComparison comparison(int64_t expected_steps) const {
    ResumeComparison c;
    c.golden_steps = &record_.out.reference_steps;
    c.tolerance = o_.tolerance;
    c.envelope = plan_.control ? &envelope_ : nullptr;
    c.expected_steps = expected_steps;
    // The control run (uninterrupted, at the resumed run's world size) decides what the resumed
    // run must hold: on another world size the per-rank state differs, whatever it is named.
    c.control_state = control_snapshot_ ? &*control_snapshot_ : nullptr;
    c.resumed_world_size = resumed_world_size(o_);
    return c;
  }

  // The built-in workload's own outputs: eval loss and every eval logit.
  Result<bool> compare_eval(const std::string& mode, const std::string& dir, const ModeOutcome& m) {
    const Tolerance& tol = o_.tolerance;
    CKPT_ASSIGN_OR_RETURN(const double ref_eval, eval_mean_loss(record_.out.reference_summary, "reference"));
    CKPT_ASSIGN_OR_RETURN(const double got_eval, eval_mean_loss(m.resumed_summary, "resumed run"));
    const bool noise =
        plan_.control && envelope_.within(envelope_.series, "loss", std::fabs(ref_eval - got_eval));
    record_.add_check(
        {"eval_loss",
         mode,
         within_tolerance(ref_eval, got_eval, tol) || noise,
         "eval loss reference " + format_number(ref_eval) + " resumed " + format_number(got_eval),
         {{"reference", ref_eval}, {"resumed", got_eval}, {"abs_diff", std::fabs(ref_eval - got_eval)}}},
        "eval diverged: mean loss reference " + format_number(ref_eval) + " resumed " +
            format_number(got_eval));
    CKPT_ASSIGN_OR_RETURN(LoadedTensor logits, read_eval_logits(dir + "/resumed/eval"));
    const TensorDiff ld = compare_tensor(reference_logits_.view(), logits.view(), tol);
    const bool logits_noise =
        plan_.control && ld.mismatch.empty() && envelope_.within(envelope_.components, "model", ld.max_abs);
    record_.add_check(
        {"eval_logits", mode, ld.passed() || logits_noise,
         std::to_string(ld.elements) + " logits, max abs " + format_number(ld.max_abs), to_json(ld)},
        "eval diverged: eval.logits " + (ld.mismatch.empty() ? "max abs " + format_number(ld.max_abs) +
                                                                   " at " + shape_to_string(ld.max_abs_index)
                                                             : ld.mismatch));
    return ref_eval == got_eval && ld.bit_identical();
  }

  Status compare(KillMode mode, const std::string& dir, ModeOutcome* m) {
    record_.phase(std::string("compare (") + kill_mode_name(mode) + ")");
    const std::string mode_name = kill_mode_name(mode);
    const size_t first_failure_of_mode = record_.out.failures.size();
    const ResumeComparison c = comparison(steps() - m->resumed_from_step);
    bool identical = check_metrics(record_, mode_name, c, m->resumed_steps);
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(const bool eval_identical, compare_eval(mode_name, dir, *m));
      identical = identical && eval_identical;
    }
    auto final_state = announced_snapshot(resumed_log_, steps(), "the resumed run");
    record_.add_check({"final_checkpoint_step",
                       mode_name,
                       final_state.is_ok(),
                       final_state.is_ok() ? "resumed run's final checkpoint " + final_state->path
                                           : final_state.status().message(),
                       {{"step", steps()}}});
    if (!final_state.is_ok()) {
      m->compared = false;
      return Status::ok();
    }
    identical = check_final_state(record_, mode_name, c, reference_snapshot_, std::move(*final_state),
                                  first_failure_of_mode, &m->components) &&
                identical;
    m->compared = true;
    m->bit_identical = identical;
    return Status::ok();
  }

  // Damages a copy of the step-N checkpoint, relaunches from it and classifies what the program did.
  Status run_fault(const std::string& fault, const CheckpointEvent& checkpoint,
                   const CheckpointEvent& older) {
    record_.phase("fault " + fault);
    const std::string dir = work_ + "/faults/" + fault;
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    std::string copy;
    CKPT_ASSIGN_OR_RETURN(const std::string damage,
                          damage_checkpoint_copy(fault, checkpoint, older, dir, &copy));
    if (damage.empty()) {
      record_.add_check(fault_not_applicable(fault, "the checkpoint is a single file"));
      return Status::ok();
    }
    const ProgramRun run = run_of("resumed", dir, copy);
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child,
                          launcher_->start(run, dir, RunShape::kResumed));
    const ChildExit e = launcher_->wait(*child, "fault " + fault, run.metrics, record_.progress, steps());
    FaultGolden golden;
    golden.steps = &record_.out.reference_steps;
    golden.final_state = &reference_snapshot_;
    golden.final_step = steps();
    golden.tolerance = o_.tolerance;
    golden.built_in = built_in();
    record_fault_run(record_, fault, damage, e, run.metrics, run.ckpt_dir, dir + "/stderr.log", golden);
    return Status::ok();
  }

  Status run_mode(KillMode mode) {
    const std::string dir = work_ + "/" + kill_mode_name(mode);
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    ModeOutcome m;
    m.mode = mode;
    Status s = run_mode_steps(mode, dir, &m);
    record_.out.modes.push_back(std::move(m));
    return s;
  }

  Status run_mode_steps(KillMode mode, const std::string& dir, ModeOutcome* m) {
    CKPT_ASSIGN_OR_RETURN(std::optional<CheckpointEvent> killed_at, kill_subject(mode, dir));
    if (!killed_at) return Status::ok();
    const CheckpointEvent from = *killed_at;
    if (mode == KillMode::kAfterSave) after_save_checkpoint_ = from;
    const std::string root = dir + "/ckpt";
    if (built_in() && mode == KillMode::kDuringSave && torn_exercised_)
      CKPT_RETURN_IF_ERROR(check_torn_save(root));
    if (built_in() && mode == KillMode::kAfterSave && o_.inject == kStaleShardInject)
      CKPT_RETURN_IF_ERROR(plant_stale_shard(root));
    record_.phase(std::string("read checkpoint (") + kill_mode_name(mode) + ")");
    // A checkpoint that fails its check is not resumed: the drill has its answer, and resuming a
    // corrupt checkpoint would only fail again, less clearly.
    bool usable = false;
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(usable, verify_in_child(record_, exe_, from.path, dir, kill_mode_name(mode),
                                                    o_.child_timeout_seconds, &m->verify_seconds));
    } else {
      usable = check_readable(record_, from.path, kill_mode_name(mode));
      if (usable) check_resume_state(record_, from.path, kill_mode_name(mode));
    }
    if (!usable) return Status::ok();
    CKPT_ASSIGN_OR_RETURN(bool resumed, resume(mode, dir, from, m));
    if (!resumed) return Status::ok();
    CKPT_RETURN_IF_ERROR(finish_reference());
    return compare(mode, dir, m);
  }

  // The storage faults (storage_fault_drill.h): each its own subject, writing through the fault
  // file system, and its own relaunch.
  Status run_storage_faults() {
    StorageFaultSetup setup;
    setup.record = &record_;
    setup.launcher = launcher_.get();
    setup.options = &o_;
    setup.faultfs_program = faultfs_program_;
    setup.n = plan_.n;
    setup.save_every = plan_.save_every;
    setup.steps = steps();
    setup.golden.steps = &record_.out.reference_steps;
    setup.golden.final_state = &reference_snapshot_;
    setup.golden.final_step = steps();
    setup.golden.tolerance = o_.tolerance;
    setup.golden.built_in = built_in();
    for (const auto& f : o_.faults) {
      if (!is_storage_fault(f)) continue;
      if (f == "disk-full" && setup.reference_save_bytes == 0) {
        const std::string dir = work_ + "/reference";
        CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(dir + "/metrics.jsonl", dir + "/ckpt"));
        // The step-N checkpoint's size; a retention may have deleted it: then that of the newest
        // checkpoint still on disk (a save's size rarely changes from one step to the next).
        for (const auto& e : log.checkpoints)
          if (e.step == plan_.n) setup.reference_save_bytes = bytes_on_disk(e.path);
        for (auto e = log.checkpoints.rbegin();
             setup.reference_save_bytes == 0 && e != log.checkpoints.rend(); ++e)
          setup.reference_save_bytes = bytes_on_disk(e->path);
        if (setup.reference_save_bytes == 0)
          return Status::corruption(
              "fault disk-full: no checkpoint of the reference run is on disk (the size of "
              "its step-" +
              std::to_string(plan_.n) + " save sets where the disk fills)");
      }
      record_.phase("fault " + f);
      setup.dir = work_ + "/faults/" + f;
      CKPT_RETURN_IF_ERROR(run_storage_fault(f, setup));
    }
    return Status::ok();
  }

  Status run_faults() {
    if (o_.faults.empty()) return Status::ok();
    CKPT_RETURN_IF_ERROR(finish_reference());
    const bool copy_faults = std::any_of(o_.faults.begin(), o_.faults.end(),
                                         [](const std::string& f) { return !is_storage_fault(f); });
    if (copy_faults) CKPT_RETURN_IF_ERROR(run_copy_faults());
    return run_storage_faults();
  }

  Status run_copy_faults() {
    if (!after_save_checkpoint_) return Status::invalid_argument("`faults` need the after-save kill");
    auto log = read_metrics_log(work_ + "/after-save/metrics.jsonl", work_ + "/after-save/ckpt");
    CheckpointEvent older;
    if (log.is_ok())
      for (const auto& e : log->checkpoints)
        if (e.step == plan_.n - plan_.save_every) older = e;
    if (older.path.empty())
      return Status::corruption("the subject announced no checkpoint of step " +
                                std::to_string(plan_.n - plan_.save_every) + " for the stale-file fault");
    for (const auto& f : o_.faults)
      if (!is_storage_fault(f)) CKPT_RETURN_IF_ERROR(run_fault(f, *after_save_checkpoint_, older));
    return Status::ok();
  }

  Status run_all() {
    CKPT_RETURN_IF_ERROR(setup());
    // The reference is independent of the subject; they run side by side.
    CKPT_RETURN_IF_ERROR(start_reference());
    if (plan_.control) CKPT_RETURN_IF_ERROR(run_control());
    for (KillMode mode : o_.modes) CKPT_RETURN_IF_ERROR(run_mode(mode));
    CKPT_RETURN_IF_ERROR(finish_reference());
    record_.out.measured =
        outside_measurements({reference_timeline_, resumed_timelines_, component_bytes(reference_snapshot_),
                              bytes_on_disk(reference_snapshot_.path), subject_world_size(o_)});
    return run_faults();
  }

  const DrillOptions& o_;
  DrillRecord record_;
  DrillPlan plan_;
  std::string config_path_, exe_, work_, faultfs_program_;
  std::string held_kill_point_unavailable_;  // "" when the kill modes' kill point is held (held_kill_point.h)
  // Declared before the runs: a Slurm allocation the launcher took outlives every step in it.
  std::unique_ptr<ProgramLauncher> launcher_;
  std::unique_ptr<RunningProgram> reference_, control_child_;
  bool reference_done_ = false;
  StateSnapshot reference_snapshot_;
  LoadedTensor reference_logits_;
  MetricsLog resumed_log_;
  std::unique_ptr<RunWatch> reference_watch_;  // what the drill measures of the runs from outside
  RunTimeline reference_timeline_;
  std::vector<RunTimeline> resumed_timelines_;
  std::optional<CheckpointEvent> after_save_checkpoint_;
  std::optional<DrillCheck> contract_check_;  // recorded when a subject first reaches its kill point
  bool torn_exercised_ = false;               // the last during-save kill landed inside the step-N save
  NoiseEnvelope envelope_;
  std::optional<StateSnapshot> control_snapshot_;  // the control run's final state, when it ran
};

}  // namespace

DrillOutcome run_resume_drill(const DrillOptions& options, Progress* progress) {
  DrillOutcome out =
      options.live_metrics.empty() ? ResumeDrill(options, progress).run() : run_live_drill(options, progress);
  // A passed drill's scratch dir holds nothing anyone needs (copies of real checkpoints, logs of
  // runs that matched): it goes. A failed one is the evidence, and stays.
  if (out.exit_code == 0 && !options.keep_work_dir && !out.work_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(out.work_dir, ec);
    out.work_dir_kept = static_cast<bool>(ec);
  }
  return out;
}

}  // namespace ckpt
