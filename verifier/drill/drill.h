// The restore drill: proves that a training job killed with SIGKILL at a checkpoint resumes to
// exactly where an uninterrupted run goes. Every run is a real child process of this binary
// (`ckptcheck train ...`, `ckptcheck verify ... --json`); the drill itself is torch-free.
//
//   reference  train N+K steps uninterrupted            (runs in parallel with the first subject)
//   subject    train, held at its step-N save, SIGKILLed (after-save: committed; during-save: torn)
//   verify     the checkpoint the resume will use       (the CLI's own verify code path)
//   resumed    a fresh process: train --resume latest to step N+K
//   compare    per-step metrics, eval loss and logits, final state by component
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

struct DrillOptions {
  std::string config_path;
  int64_t save_at = -1;       // N: the step the subject is killed at; -1 = config steps / 2
  int64_t resume_steps = -1;  // K: steps after N; -1 = N
  std::vector<KillMode> modes = {KillMode::kAfterSave};
  Tolerance tolerance;
  std::string inject;  // "" or a negative control
  std::string long_run_path;
  size_t shards = 2;
  std::string format = "native";
  std::string work_dir;  // a fresh scratch dir is made inside; default $TMPDIR or /tmp
  double child_timeout_seconds = 600;
  std::string executable;  // the ckptcheck binary for children; default this process's
  // > 0: every training run goes through `ckptcheck launch --nproc-per-node P -- train` (the
  // config's strategy must be ddp or fsdp); the resumed run uses resume_nproc ranks (0 = nproc).
  int nproc = 0;
  int resume_nproc = 0;
};

// The tolerance a drill across world sizes defaults to: reductions run in another order there,
// so bit identity is not expected.
constexpr double kCrossWorldRtol = 1e-4;
constexpr double kCrossWorldAtol = 1e-6;
// True when the subject and the resumed run have different world sizes.
bool changes_world_size(const DrillOptions& options);

// One thing the drill established, with its numbers.
struct DrillCheck {
  std::string name;
  std::string mode;  // kill mode, "" for the whole drill
  bool passed = true;
  std::string detail;
  nlohmann::json numbers = nlohmann::json::object();
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

struct DrillOutcome {
  int exit_code = 0;                  // 0 pass, 1 a check failed, 2 error
  std::string error;                  // the reason for exit 2
  std::vector<std::string> failures;  // one line each: "optimizer diverged: ... (after-save kill)"
  std::vector<DrillCheck> checks;
  std::vector<ModeOutcome> modes;
  int64_t save_at = 0;
  int64_t resume_steps = 0;
  nlohmann::json config = nlohmann::json::object();  // resolved pilot config
  nlohmann::json pins = nlohmann::json::object();    // from the reference's final manifest
  nlohmann::json reference_summary = nlohmann::json::object();
  std::vector<StepRecord> reference_steps;
  bool bit_identical = false;
  double wall_seconds = 0;
  std::string work_dir;
  std::string verdict() const { return exit_code == 0 ? "pass" : exit_code == 1 ? "fail" : "error"; }
};

// Runs the whole drill. Never throws and never hangs: every child has a deadline.
DrillOutcome run_resume_drill(const DrillOptions& options, Progress* progress = nullptr);

}  // namespace ckpt
