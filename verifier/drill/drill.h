// The restore drill: proves that a training job killed with SIGKILL at a checkpoint resumes to
// exactly where an uninterrupted run goes. One engine for any program that keeps the contract in
// verifier/drill/program_contract.h: `drill -- COMMAND` runs the user's program, `drill --config F`
// runs the built-in workload (`ckptcheck train`, which keeps the same contract) and adds its own
// checks (verify, eval logits, negative controls). Every run is a real child process; the drill
// itself is torch-free.
//
//   reference  N+K steps uninterrupted                    (in parallel with the first subject)
//   control    (--control) a second reference: the run-to-run noise envelope
//   subject    SIGKILLed right after its step-N checkpoint event (after-save), or as soon as it
//              starts writing its step-N checkpoint (during-save: a file appears in the ckpt dir)
//   read       the checkpoint the resume will use, through the readers (built-in: also `verify`)
//   resumed    a fresh process resumed from the last announced checkpoint, to step N+K
//   compare    every metric at every common step; final checkpoints tensor by tensor, by component
//   faults     (--faults) a damaged copy of the checkpoint, relaunched and classified
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/tensors/state_compare.h"

namespace ckpt {

class Progress;

enum class KillMode { kAfterSave, kDuringSave };
const char* kill_mode_name(KillMode mode);  // "after-save" | "during-save"
// "after-save" | "during-save" | "both"; false on anything else.
bool parse_kill_modes(const std::string& name, std::vector<KillMode>* out);

// The negative controls: restore faults go to the resumed `train --inject`; stale-shard is done by
// the drill itself on its scratch checkpoint.
constexpr const char* kStaleShardInject = "stale-shard";
bool is_known_drill_inject(const std::string& name);

// What a relaunch from a damaged checkpoint did (copy faults: refused passes), or what a storage
// fault left (storage_fault_drill.h: survived, refused and fell-back pass).
enum class FaultOutcome {
  kRefused,
  kSilentDivergence,
  kSilentMatch,
  kSurvived,             // the checkpoint that had to survive did, and the relaunch from it matched
  kFellBack,             // read-error: the relaunch fell back to an older whole checkpoint and matched
  kLost,                 // the checkpoint that had to survive did not (power loss, a failed save)
  kAnnouncedIncomplete,  // disk-full: a checkpoint announced that the failed save left incomplete
  kFreshStart,           // the relaunch started from scratch
  kResumedUnreadable,    // read-error: the relaunch resumed from state it could not read
  kRelaunchFailed,       // the relaunch from a checkpoint that survived failed or diverged
  kNotExercised,         // the fault did not land where it is about (a warning, not a pass)
};
// "refused" | "silent-divergence" | "silent-match" | "survived" | "fell-back" | "lost" |
// "announced-incomplete" | "fresh-start" | "resumed-unreadable" | "relaunch-failed" | "not-exercised"
const char* fault_outcome_name(FaultOutcome outcome);
// Whether the fault catalogue (fault_catalogue.h) has `name`.
bool is_known_fault(const std::string& name);

// Validation of these options (plan_drill, the live drill, check_launcher_options) names their
// fields in backquotes, "`save_at` must be >= 1", never a flag: the CLI shows each field as the
// flag that sets it (verifier/cli/option_flags.h).
struct DrillOptions {
  std::vector<std::string> command;  // `drill -- COMMAND ARGS...`; empty = the built-in workload
  std::string config_path;           // the built-in workload's config
  int64_t save_at = -1;              // N: the step the subject is killed at; -1 = config steps / 2
  int64_t save_every = -1;    // CKPTCHECK_SAVE_EVERY; -1 = gcd(N, K) (N/2 for during-save and stale-shard)
  int64_t resume_steps = -1;  // K: steps after N; -1 = N
  std::vector<KillMode> modes = {KillMode::kAfterSave};
  Tolerance tolerance;
  std::string inject;  // "" or a negative control
  std::string long_run_path;
  size_t shards = 2;
  std::string format = "native";
  std::string work_dir;        // a fresh scratch dir is made inside; default $TMPDIR or /tmp
  bool keep_work_dir = false;  // keep the scratch dir after a pass too (it is always kept after a failure)
  double child_timeout_seconds = 600;
  std::string executable;  // the ckptcheck binary for children; default this process's
  // > 0: every training run has P ranks per node, started by `ckptcheck launch --nproc-per-node P`
  // (the built-in workload's config strategy must then be ddp or fsdp); the resumed run uses
  // resume_nproc ranks per node (0 = nproc).
  int nproc = 0;
  int resume_nproc = 0;
  // "local": runs are child processes of the drill. "slurm": every run is a job step (`srun ...
  // ckptcheck launch -- PROGRAM`, each task one rank), killed with `scancel --signal=KILL JOB.STEP`,
  // in the current allocation (SLURM_JOB_ID) or one the drill takes with salloc and releases.
  std::string launcher = "local";
  int nodes = 1;                            // slurm: nodes of the subject, reference and control
  int resume_nodes = 0;                     // slurm: nodes of the resumed run (0 = nodes)
  std::vector<std::string> slurm_args;      // given to every srun (and salloc), e.g. --partition=gpu
  double slurm_start_timeout_seconds = 60;  // a step or allocation still pending then is an error
  std::vector<std::string> faults;          // fault_catalogue.h: copy faults and storage faults
  // The relaunch after a kill (after-save, during-save) gets a new, empty checkpoint dir ("fresh")
  // or the subject's own as the kill left it ("same", as a restarted job finds it). Fresh by default:
  // the kill lands a few milliseconds after the kill point, and a fast subject may have written past
  // it (a later checkpoint a crash at that instant would not have left). Storage faults always
  // relaunch in the subject's dir.
  std::string relaunch_dir = "fresh";
  // A second uninterrupted reference measures the run-to-run noise; a resumed value that differs
  // from the reference passes when it lies within control_multiple x that envelope. On by default
  // when the world size changes.
  bool control = false;
  double control_multiple = 4;
  // --live RUN_METRICS: the golden values are a live (or finished) run's own contract log and
  // checkpoints, not a reference run (live_drill.h). K = resume_steps (default: the run's save
  // interval); the checkpoint is the newest announced one still on disk, or live_checkpoint.
  std::string live_metrics;
  std::string live_checkpoint;
  double wait_timeout_seconds = 3600;  // how long the drill waits for the live run to reach N+K
  // A live run whose log has not changed for this long is not advancing (it crashed or stopped):
  // the drill says so instead of waiting out wait_timeout_seconds. -1: the rule of live_drill.h
  // (max(60 s, 10 x the run's median step interval)); 0: never (wait out the timeout).
  double live_stall_seconds = -1;
};

// The tolerance a drill across world sizes defaults to: reductions run in another order there,
// so bit identity is not expected.
constexpr double kCrossWorldRtol = 1e-4;
constexpr double kCrossWorldAtol = 1e-6;
// Ranks of the subject (and reference), and of the resumed run: nodes x ranks per node.
int subject_world_size(const DrillOptions& options);
int resumed_world_size(const DrillOptions& options);
// True when the subject and the resumed run have different world sizes.
bool changes_world_size(const DrillOptions& options);

// One thing the drill established, with its numbers.
struct DrillCheck {
  std::string name;
  std::string mode;  // kill mode, "" for the whole drill
  bool passed = true;
  std::string detail;
  nlohmann::json numbers = nlohmann::json::object();
  // A warning: what the check is for did not happen (a torn save that was not exercised). Never
  // a pass and never a failure: `passed` is false, it adds no failure line, JUnit says skipped.
  bool skipped = false;
  // How long establishing it took: from the check recorded before it (or the drill's start) to
  // this one (DrillRecord stamps it); JUnit's time="...". -1 = not stamped.
  double seconds = -1;
};

struct ModeOutcome {
  KillMode mode = KillMode::kAfterSave;
  int64_t resumed_from_step = -1;
  bool compared = false;  // the resumed run finished and was compared
  bool bit_identical = false;
  std::vector<StepRecord> resumed_steps;
  std::map<std::string, ComponentDiff> components;
  nlohmann::json resumed_summary = nlohmann::json::object();
  double verify_seconds = 0;
};

struct FaultResult {
  std::string fault;
  FaultOutcome outcome = FaultOutcome::kRefused;
  bool passed = true;
  std::string detail;       // what was damaged, and how the program reacted
  std::string would_catch;  // for a silent outcome: what would have caught it; storage: the missing call
};

struct DrillOutcome {
  int exit_code = 0;                  // 0 pass, 1 a check failed, 2 error
  std::string error;                  // the reason for exit 2
  std::vector<std::string> failures;  // one line each: "optimizer diverged: ... (after-save kill)"
  // The one cause a failed drill leads with (drill_headline, drill_record.h); "" when none is named.
  std::string headline;
  std::vector<DrillCheck> checks;
  std::vector<ModeOutcome> modes;
  int64_t save_at = 0;
  int64_t resume_steps = 0;
  nlohmann::json config = nlohmann::json::object();  // resolved pilot config
  nlohmann::json pins = nlohmann::json::object();    // from the reference's final manifest
  nlohmann::json reference_summary = nlohmann::json::object();
  std::vector<StepRecord> reference_steps;
  std::vector<FaultResult> faults;
  // What the drill measured of the runs from outside, for any program (run_measurements.h).
  nlohmann::json measured = nlohmann::json::object();
  bool built_in = true;
  std::string drill_mode = "scratch";              // "scratch" (a reference run) | "live" (a live run's log)
  nlohmann::json live = nlohmann::json::object();  // live: the run, its checkpoint, the snapshot
  bool bit_identical = false;
  double wall_seconds = 0;
  std::string work_dir;
  bool work_dir_kept = true;  // false once a passed drill removed its scratch dir
  std::string verdict() const { return exit_code == 0 ? "pass" : exit_code == 1 ? "fail" : "error"; }
};

// Runs the whole drill (the live drill when options.live_metrics is set). Never throws and never
// hangs: every child has a deadline.
DrillOutcome run_resume_drill(const DrillOptions& options, Progress* progress = nullptr);

}  // namespace ckpt
