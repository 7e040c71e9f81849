#include "verifier/drill/drill.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <set>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/progress.h"
#include "base/seconds_since.h"
#include "fixtures/pilot_config.h"
#include "formats/native_shard.h"
#include "formats/tensor_file.h"
#include "formats/tensor_file_open.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "shards/manifest.h"
#include "verifier/drill/pilot_rules.h"
#include "verifier/drill/program_contract.h"
#include "verifier/drill/run_measurements.h"
#include "verifier/drill/save_watch.h"
#include "verifier/process/child_process.h"
#include "verifier/process/slurm_launcher.h"
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
  }
  return "?";
}

bool is_known_fault(const std::string& name) {
  return name == "truncate" || name == "bitflip" || name == "drop-file" || name == "stale-file";
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

// The JSON object `verify --json` printed: its last line that parses as an object.
nlohmann::json parse_verify_output(const std::string& out) {
  auto whole = parse_json(out, "verify output");
  if (whole.is_ok() && whole->is_object()) return *whole;
  size_t end = out.size();
  while (end > 0) {
    const size_t start = out.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    auto j = parse_json(out.substr(from, end - from), "verify output");
    if (j.is_ok() && j->is_object()) return *j;
    if (start == std::string::npos) break;
    end = start;
  }
  return nlohmann::json();
}

std::string fault_would_catch(bool built_in) {
  return built_in ? "`ckptcheck verify` before the resume (every shard and chunk SHA-256 in the manifest)"
                  : "a SHA-256 of every file recorded when the checkpoint was saved and checked before the "
                    "resume (what `ckptcheck verify` does for checkpoints ckptcheck writes)";
}

uint64_t file_size_of(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

// The regular files of a checkpoint (itself, when it is one file), largest first.
std::vector<fs::path> checkpoint_files(const fs::path& checkpoint) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_regular_file(checkpoint, ec)) return {checkpoint};
  for (const auto& e : fs::recursive_directory_iterator(checkpoint, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const uint64_t x = file_size_of(a), y = file_size_of(b);
    return x != y ? x > y : a < b;
  });
  return files;
}

// The file a stale-file or drop-file fault picks: an optimizer file if the checkpoint has one (the
// state people forget), else the second largest (the largest is usually the model), else the only one.
fs::path pick_state_file(const std::vector<fs::path>& files) {
  for (const auto& f : files)
    if (f.filename().string().find("optim") != std::string::npos) return f;
  return files.size() > 1 ? files[1] : files.front();
}

// Flips the exponent's high bit in the middle element of the first tensor payload the readers find
// in `file` (so the damage is large, not a rounding error); the file's middle byte otherwise.
Result<std::string> flip_payload_byte(const fs::path& file) {
  uint64_t offset = file_size_of(file) / 2;
  std::string where = "middle byte";
  auto opened = open_tensor_file(file.string());
  if (opened.is_ok() && !(*opened)->chunks().empty()) {
    const auto& chunks = (*opened)->chunks();
    const ChunkInfo* best = &chunks[0];
    for (const auto& c : chunks)
      if (c.data_bytes > best->data_bytes) best = &c;
    const uint64_t size = dtype_size(best->dtype);
    if (best->data_bytes >= size && size > 0) {
      offset = best->data_offset + (best->data_bytes / size / 2) * size + size - 1;
      where = "tensor " + best->label();
    }
  }
  opened = Status::ok();  // closes the file before it is written
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  if (!f.read(&byte, 1))
    return Status::io_error(file.string() + ": cannot read byte " + std::to_string(offset));
  byte = static_cast<char>(byte ^ 0x40);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&byte, 1);
  if (!f) return Status::io_error(file.string() + ": cannot write byte " + std::to_string(offset));
  return "flipped bit 6 of byte " + std::to_string(offset) + " of " + file.filename().string() + " (" +
         where + ")";
}

// "rng", and the per-rank RNG state programs keep in files of their own ("rng-rank1", "rng_3").
bool is_rng_component(const std::string& component) {
  return component.rfind("rng", 0) == 0 &&
         (component.size() == 3 || !std::isalpha(static_cast<unsigned char>(component[3])));
}

class ResumeDrill {
 public:
  ResumeDrill(const DrillOptions& options, Progress* progress) : o_(options), progress_(progress) {}

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
    if (!s.is_ok()) {
      out_.exit_code = 2;
      out_.error = s.message();
    } else {
      out_.exit_code = out_.failures.empty() ? 0 : 1;
    }
    out_.bit_identical = out_.exit_code == 0 && !out_.modes.empty();
    for (const auto& m : out_.modes) out_.bit_identical = out_.bit_identical && m.compared && m.bit_identical;
    out_.wall_seconds = seconds_since(start);
    if (progress_) progress_->finish();
    return std::move(out_);
  }

 private:
  void phase(const std::string& what) {
    ++phase_done_;
    if (progress_) progress_->update("drill: " + what, phase_done_, phase_total_);
  }

  void add_check(DrillCheck check, const std::string& failure = "") {
    if (!check.passed) fail(failure.empty() ? check.name + ": " + check.detail : failure, check.mode);
    out_.checks.push_back(std::move(check));
  }
  void fail(const std::string& message, const std::string& mode) {
    out_.failures.push_back(mode.empty() ? message : message + " (" + mode + " kill)");
  }

  bool built_in() const { return o_.command.empty(); }
  bool during_save() const { return std::count(o_.modes.begin(), o_.modes.end(), KillMode::kDuringSave) > 0; }

  Status setup() {
    out_.built_in = built_in();
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(PilotConfig config, load_pilot_config(o_.config_path));
      if (!o_.long_run_path.empty()) {
        CKPT_ASSIGN_OR_RETURN(PilotConfig long_run, load_pilot_config(o_.long_run_path));
        CKPT_RETURN_IF_ERROR(check_pilot_rules(config, long_run));
      }
      out_.config = config.resolved();
      n_ = o_.save_at < 0 ? config.steps / 2 : o_.save_at;
      std::error_code ec;
      config_path_ = fs::absolute(o_.config_path, ec).string();
    } else {
      if (o_.save_at < 1) return Status::invalid_argument("drill -- COMMAND needs --save-at N (N >= 1)");
      if (!o_.inject.empty())
        return Status::invalid_argument(
            "--inject drives the built-in workload; a program of your own shows a resume bug through "
            "its own flags");
      n_ = o_.save_at;
      out_.config = {{"command", o_.command}};
    }
    k_ = o_.resume_steps < 0 ? n_ : o_.resume_steps;
    out_.save_at = n_;
    out_.resume_steps = k_;
    if (n_ < 1 || k_ < 1)
      return Status::invalid_argument("--save-at and --resume-steps must be >= 1 (got N=" +
                                      std::to_string(n_) + ", K=" + std::to_string(k_) + ")");
    const bool needs_half = o_.inject == kStaleShardInject || during_save() || !o_.faults.empty();
    if (needs_half && o_.save_every <= 0 && (n_ < 2 || n_ % 2 != 0))
      return Status::invalid_argument(
          "--save-at must be even and >= 2 for during-save, stale-shard or --faults, which resume from the "
          "checkpoint at N/2 (got " +
          std::to_string(n_) + "; or give --save-every)");
    save_every_ = o_.save_every > 0 ? o_.save_every : needs_half ? n_ / 2 : std::gcd(n_, k_);
    // An earlier checkpoint at N - save_every must exist for during-save and the stale faults.
    if (needs_half && (save_every_ < 1 || n_ < 2 * save_every_))
      return Status::invalid_argument(
          "--save-at must be >= 2 x the save interval for during-save, stale-shard or --faults (got N=" +
          std::to_string(n_) + ", save every " + std::to_string(save_every_) + ")");
    if (save_every_ < 1 || n_ % save_every_ != 0 || (n_ + k_) % save_every_ != 0)
      return Status::invalid_argument("the save interval " + std::to_string(save_every_) + " must divide N=" +
                                      std::to_string(n_) + " and N+K=" + std::to_string(n_ + k_));
    if (!o_.inject.empty() && !is_known_drill_inject(o_.inject))
      return Status::invalid_argument("--inject: unknown negative control '" + o_.inject + "'");
    if (o_.inject == kStaleShardInject && o_.modes.size() == 1 && o_.modes[0] == KillMode::kDuringSave)
      return Status::invalid_argument(
          "--inject stale-shard needs an after-save kill (--kill after-save|both)");
    for (const auto& f : o_.faults)
      if (!is_known_fault(f))
        return Status::invalid_argument("--faults: unknown fault '" + f +
                                        "' (truncate, bitflip, drop-file, stale-file)");
    if (!o_.faults.empty() && std::count(o_.modes.begin(), o_.modes.end(), KillMode::kAfterSave) == 0)
      return Status::invalid_argument(
          "--faults damage the after-save checkpoint: use --kill after-save|both");
    if (o_.shards < 1) return Status::invalid_argument("--shards must be >= 1");
    CKPT_RETURN_IF_ERROR(check_launcher_options());
    exe_ = o_.executable;
    if (exe_.empty()) {
      CKPT_ASSIGN_OR_RETURN(exe_, current_executable());
    }
    // A fresh dir per drill: a resume must never find a checkpoint of an earlier drill.
    CKPT_ASSIGN_OR_RETURN(work_, make_scratch_directory(o_.work_dir, "ckptcheck-drill"));
    out_.work_dir = work_;
    if (slurm()) {
      CKPT_ASSIGN_OR_RETURN(SlurmAllocation job,
                            SlurmAllocation::acquire(std::max(o_.nodes, o_.resume_nodes), o_.slurm_args,
                                                     o_.slurm_start_timeout_seconds, work_ + "/salloc.log"));
      allocation_.emplace(std::move(job));
    }
    control_ = o_.control || changes_world_size(o_);
    phase_total_ = 1 + (control_ ? 1 : 0) + static_cast<long long>(o_.modes.size()) * 4 +
                   static_cast<long long>(o_.faults.size());
    add_check({"contract",
               "",
               true,
               std::string(built_in() ? "built-in workload" : "program `" + o_.command[0] + "`") +
                   ": N=" + std::to_string(n_) + " K=" + std::to_string(k_) + ", save every " +
                   std::to_string(save_every_),
               {{"save_at", n_}, {"resume_steps", k_}, {"save_every", save_every_}, {"steps", n_ + k_}}});
    if (o_.nproc > 0 || o_.resume_nproc > 0 || slurm()) {
      const int subject = subject_world_size(o_), resumed = resumed_world_size(o_);
      const std::string on = slurm() ? " through Slurm (job " + std::to_string(allocation_->job_id()) +
                                           (allocation_->owned() ? ", allocated by the drill" : "") + ")"
                                     : "";
      add_check(
          {"world_sizes",
           "",
           true,
           "subject and reference " + std::to_string(subject) + " rank(s), resumed " +
               std::to_string(resumed) + " rank(s)" + on + "; tolerance rtol " +
               std::to_string(o_.tolerance.rtol) + " atol " + std::to_string(o_.tolerance.atol) +
               (changes_world_size(o_) ? " (across world sizes: rng component not compared)" : ""),
           {{"subject_ranks", subject},
            {"resumed_ranks", resumed},
            {"launcher", o_.launcher},
            {"nodes", slurm() ? std::max(o_.nodes, 1) : 1},
            {"resumed_nodes", slurm() ? (o_.resume_nodes > 0 ? o_.resume_nodes : std::max(o_.nodes, 1)) : 1},
            {"slurm_job", slurm() ? nlohmann::json(allocation_->job_id()) : nlohmann::json()},
            {"rtol", o_.tolerance.rtol},
            {"atol", o_.tolerance.atol}}});
    }
    return Status::ok();
  }

  int resume_nproc() const { return o_.resume_nproc > 0 ? o_.resume_nproc : o_.nproc; }
  bool slurm() const { return o_.launcher == "slurm"; }

  Status check_launcher_options() const {
    if (o_.launcher != "local" && o_.launcher != "slurm")
      return Status::invalid_argument("--launcher: expected local or slurm, got '" + o_.launcher + "'");
    if (!slurm() && (o_.nodes != 1 || o_.resume_nodes != 0 || !o_.slurm_args.empty()))
      return Status::invalid_argument("--nodes, --resume-nodes and --slurm-args need --launcher slurm");
    if (o_.nodes < 1 || o_.resume_nodes < 0)
      return Status::invalid_argument("--nodes must be >= 1 and --resume-nodes >= 1 (got " +
                                      std::to_string(o_.nodes) + ", " + std::to_string(o_.resume_nodes) +
                                      ")");
    return Status::ok();
  }

  // Which shape a run has: the subject's (reference, subject) or the resumed run's (control,
  // resumed, faults).
  enum class Shape { kSubject, kResumed };

  ProgramRun run_of(const std::string& role, const std::string& dir, const std::string& resume = "") const {
    ProgramRun r;
    r.role = role;
    r.ckpt_dir = dir + "/ckpt";
    r.steps = n_ + k_;
    r.save_every = save_every_;
    r.metrics = dir + "/metrics.jsonl";
    r.resume = resume;
    return r;
  }

  // Starts one run of the program under the contract, in the subject's or the resumed run's
  // shape. The built-in workload is `ckptcheck train` plus the flags only it has (eval output and a
  // summary for the built-in checks). With ranks per node, the ranks are started by `ckptcheck
  // launch` (locally: a SIGKILL of the launcher takes every rank with it) or by Slurm, one step per
  // run with each task one rank.
  Result<std::unique_ptr<RunningProgram>> start(const ProgramRun& run, const std::string& dir, Shape shape,
                                                const std::vector<std::string>& extra = {}) {
    CKPT_RETURN_IF_ERROR(make_directory(run.ckpt_dir));
    const int nproc = shape == Shape::kSubject ? o_.nproc : resume_nproc();
    // What every rank runs; a ckptcheck subcommand or a program `launch` finds in PATH.
    std::vector<std::string> rank_argv;
    if (built_in()) {
      rank_argv = {"train",   "--config",   config_path_,  "--shards",  std::to_string(o_.shards), "--format",
                   o_.format, "--eval-out", dir + "/eval", "--summary", dir + "/summary.json"};
      rank_argv.insert(rank_argv.end(), extra.begin(), extra.end());
    } else {
      rank_argv = substitute_placeholders(o_.command, run);
    }
    SpawnOptions spawn;
    if (slurm()) {
      spawn.argv = {exe_, "launch", "--"};
    } else if (nproc > 0) {
      spawn.argv = {exe_, "launch", "--no-slurm", "--nproc-per-node", std::to_string(nproc), "--"};
    } else if (built_in()) {
      spawn.argv = {exe_};
    } else {
      spawn.search_path = true;
    }
    spawn.argv.insert(spawn.argv.end(), rank_argv.begin(), rank_argv.end());
    spawn.env = contract_environment(run);
    spawn.env.push_back("CKPTCHECK_NO_PROGRESS=1");
    if (run.resume.empty()) spawn.unset_env.push_back(kEnvResume);
    spawn.stdout_log = dir + "/stdout.log";
    spawn.stderr_log = dir + "/stderr.log";
    if (!slurm()) {
      CKPT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(spawn));
      return std::unique_ptr<RunningProgram>(new ChildProcess(std::move(child)));
    }
    SlurmStepRequest step;
    step.nodes = shape == Shape::kSubject || o_.resume_nodes == 0 ? std::max(o_.nodes, 1) : o_.resume_nodes;
    step.tasks_per_node = std::max(nproc, 1);
    step.extra_args = o_.slurm_args;
    step.name =
        "ckptcheck-" + run.role + "-" + std::to_string(::getpid()) + "-" + std::to_string(++steps_started_);
    step.program = spawn;
    step.start_timeout_seconds = o_.slurm_start_timeout_seconds;
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<SlurmStep> started, SlurmStep::start(*allocation_, step));
    return std::unique_ptr<RunningProgram>(std::move(started));
  }

  // Waits for a training run; on a terminal the progress line shows the phase and the run's last
  // logged step, read from its metrics file as it grows.
  ChildExit wait_training(RunningProgram& child, const std::string& what, const std::string& metrics) {
    if (!progress_ || !progress_->enabled()) return child.wait(o_.child_timeout_seconds, nullptr);
    MetricsTail tail(metrics);
    return child.wait(o_.child_timeout_seconds, [&] {
      CheckpointEvent ignored;
      tail.poll_for_checkpoint(-1, &ignored);
      progress_->update("drill: " + what + ", step", std::max<int64_t>(0, tail.last_step()), n_ + k_);
    });
  }

  Result<ChildExit> wait_ok(RunningProgram& child, const std::string& what, const std::string& dir) {
    const ChildExit e = wait_training(child, what, dir + "/metrics.jsonl");
    if (!e.ok())
      return Status::io_error(what + " failed (" + e.describe() + "): " + log_tail(dir + "/stderr.log"));
    return e;
  }

  // The snapshot of the checkpoint a run announced for `step`.
  Result<StateSnapshot> final_snapshot(const MetricsLog& log, const std::string& run) {
    for (auto it = log.checkpoints.rbegin(); it != log.checkpoints.rend(); ++it) {
      if (it->step != n_ + k_) continue;
      auto snap = read_state_snapshot(it->path);
      if (!snap.is_ok()) return snap.status().with_context(run + "'s final checkpoint " + it->path);
      return snap;
    }
    return Status::corruption(run + " announced no checkpoint of step " + std::to_string(n_ + k_) +
                              " (a {\"event\": \"checkpoint\", \"step\": " + std::to_string(n_ + k_) +
                              ", \"path\": ...} line in CKPTCHECK_METRICS)");
  }

  Status start_reference() {
    const std::string dir = work_ + "/reference";
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    CKPT_ASSIGN_OR_RETURN(reference_, start(run_of("reference", dir), dir, Shape::kSubject,
                                            built_in() ? std::vector<std::string>{"--measure-memory"}
                                                       : std::vector<std::string>{}));
    reference_watch_ = std::make_unique<RunWatch>(reference_->local_pid(), dir + "/metrics.jsonl");
    return Status::ok();
  }

  Status finish_reference() {
    if (reference_done_) return Status::ok();
    phase("reference run");
    const std::string dir = work_ + "/reference";
    CKPT_RETURN_IF_ERROR(wait_ok(*reference_, "reference run", dir).status());
    reference_timeline_ = reference_watch_->stop();
    reference_done_ = true;
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(dir + "/metrics.jsonl"));
    out_.reference_steps = log.steps;
    CKPT_ASSIGN_OR_RETURN(reference_snapshot_, final_snapshot(log, "the reference run"));
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(out_.reference_summary, read_json_file(dir + "/summary.json", kMaxSummaryBytes));
      CKPT_ASSIGN_OR_RETURN(reference_logits_, read_eval_logits(dir + "/eval"));
      auto manifest = read_manifest_file(reference_snapshot_.path);
      if (manifest.is_ok()) out_.pins = manifest->pins;
    }
    return Status::ok();
  }

  // A second uninterrupted run (with the resumed run's world size): how far two runs of this
  // program differ with no restart at all.
  Status run_control() {
    phase("control run");
    const std::string dir = work_ + "/control";
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    CKPT_ASSIGN_OR_RETURN(control_child_, start(run_of("control", dir), dir, Shape::kResumed));
    CKPT_RETURN_IF_ERROR(wait_ok(*control_child_, "control run", dir).status());
    control_child_.reset();
    CKPT_RETURN_IF_ERROR(finish_reference());
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(dir + "/metrics.jsonl"));
    CKPT_ASSIGN_OR_RETURN(StateSnapshot control, final_snapshot(log, "the control run"));
    const Tolerance exact;
    bool identical = true;
    nlohmann::json envelope = nlohmann::json::object();
    for (const auto& d : compare_step_metrics(out_.reference_steps, log.steps, exact)) {
      series_envelope_[d.field] = d.max_abs;
      identical = identical && d.bit_identical;
      envelope[d.field] = d.max_abs;
    }
    StateSnapshot ref = reference_snapshot_;
    drop_unmatched_rng(ref, control);
    for (const auto& [name, c] : compare_snapshots(ref, control, exact)) {
      component_envelope_[name] = c.max_abs;
      identical = identical && c.bit_identical;
      envelope[name] = c.max_abs;
    }
    std::string detail = identical ? "two uninterrupted runs are bit-identical: no noise to allow for"
                                   : "two uninterrupted runs of this program already differ (loss max abs " +
                                         format_number(series_envelope_["loss"]) +
                                         "): a resumed value passes within " +
                                         format_number(o_.control_multiple) + "x that envelope";
    add_check({"control_envelope",
               "",
               true,
               detail,
               {{"bit_identical", identical}, {"max_abs", envelope}, {"multiple", o_.control_multiple}}});
    return Status::ok();
  }

  // Across world sizes each rank has its own RNG stream: there is no counterpart to compare with.
  void drop_unmatched_rng(StateSnapshot& a, StateSnapshot& b) const {
    if (!changes_world_size(o_)) return;
    for (StateSnapshot* s : {&a, &b}) {
      s->tensors.erase(std::remove_if(s->tensors.begin(), s->tensors.end(),
                                      [](const LoadedTensor& t) { return is_rng_component(t.component); }),
                       s->tensors.end());
      for (auto it = s->values.begin(); it != s->values.end();)
        it = is_rng_component(it->second.component) ? s->values.erase(it) : std::next(it);
    }
  }

  // Within the user's tolerance, or (with a control run) within control_multiple x the noise.
  bool within_envelope(const std::map<std::string, double>& envelope, const std::string& key,
                       double max_abs) const {
    auto it = envelope.find(key);
    return it != envelope.end() && it->second > 0 && max_abs <= o_.control_multiple * it->second;
  }

  // The subject is SIGKILLed right after its step-N checkpoint event, or as soon as it starts
  // writing the step-N checkpoint; returns the checkpoint the relaunch resumes from.
  Result<CheckpointEvent> kill_subject(KillMode mode, const std::string& dir) {
    phase(std::string("subject (") + kill_mode_name(mode) + ")");
    const ProgramRun run = run_of("subject", dir);
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> started, start(run, dir, Shape::kSubject));
    RunningProgram& subject = *started;
    const std::string subject_label = subject.label();
    WatchOutcome w;
    StepObserver show;
    if (progress_ && progress_->enabled()) {
      const std::string label = std::string("drill: subject (") + kill_mode_name(mode) + "), step";
      show = [this, label](int64_t step) { progress_->update(label, step, n_); };
    }
    if (mode == KillMode::kAfterSave) {
      w = kill_after_checkpoint(subject, run.metrics, n_, o_.child_timeout_seconds, show);
    } else {
      CKPT_ASSIGN_OR_RETURN(w, kill_during_save(subject, run.metrics, run.ckpt_dir, n_ - save_every_,
                                                o_.child_timeout_seconds, show));
    }
    if (!w.triggered)
      return Status::io_error(std::string("subject (") + kill_mode_name(mode) +
                              ") never reached its kill point at step " + std::to_string(n_) + " (" +
                              w.exit.describe() + "): " + log_tail(dir + "/stderr.log"));
    const std::string what =
        mode == KillMode::kAfterSave
            ? "checkpoint event of step " + std::to_string(n_) + " (" + w.event.path + ")"
            : "creation of " + w.created + " in the checkpoint dir";
    DrillCheck c{"subject_killed", kill_mode_name(mode), w.exit.killed_by(SIGKILL), "", {}};
    c.detail =
        "SIGKILLed at the " + what + ": " + w.exit.describe() + (slurm() ? " (" + subject_label + ")" : "");
    c.numbers = {{"step", n_}, {"trigger", what}, {"signal", w.exit.signal}, {"exit", w.exit.describe()}};
    if (!c.passed) return Status::io_error("subject did not die of SIGKILL: " + w.exit.describe());
    add_check(c);
    if (mode == KillMode::kDuringSave) {
      // A program that saves faster than a kill lands finished its save first: say so.
      auto log = read_metrics_log(run.metrics);
      bool completed = false;
      if (log.is_ok())
        for (const auto& e : log->checkpoints) completed = completed || e.step == n_;
      add_check({"kill_landed_during_save",
                 kill_mode_name(mode),
                 true,
                 completed ? "the step-" + std::to_string(n_) +
                                 " save completed before the kill landed: "
                                 "the torn-save case was not exercised"
                           : "killed before the step-" + std::to_string(n_) + " checkpoint was announced",
                 {{"save_completed_first", completed}}});
    }
    return w.event;
  }

  // After a kill during the save: the torn step-N dir is uncommitted and `latest` skips it.
  Status check_torn_save(const std::string& ckpt_root) {
    const CheckpointListing listing = list_checkpoints(ckpt_root);
    bool step_n_committed = false;
    for (const auto& d : listing.committed)
      if (fs::path(d).filename() == step_dir_name(n_)) step_n_committed = true;
    DrillCheck torn{"torn_checkpoint_uncommitted",
                    "during-save",
                    !listing.uncommitted.empty() && !step_n_committed,
                    "",
                    {{"uncommitted", listing.uncommitted}, {"committed", listing.committed}}};
    torn.detail = std::to_string(listing.uncommitted.size()) + " uncommitted dir(s), step " +
                  std::to_string(n_) + (step_n_committed ? " committed (wrong)" : " not committed");
    add_check(torn);
    auto latest = resolve_latest_checkpoint(ckpt_root);
    const std::string want = step_dir_name(n_ - save_every_);
    const std::string got =
        latest.is_ok() ? fs::path(*latest).filename().string() : latest.status().message();
    add_check({"latest_skips_torn",
               "during-save",
               got == want,
               "resolve_latest_checkpoint -> " + got + ", expected " + want,
               {{"expected_step", n_ - save_every_}, {"resolved", got}}});
    return Status::ok();
  }

  // Invariant: this only ever touches the drill's own scratch checkpoint under work_, never a
  // user's checkpoint: it is the stale-shard negative control (a shard left over from an older
  // save, with the right name but the wrong bytes).
  Status plant_stale_shard(const std::string& ckpt_root) {
    const std::string old_dir = ckpt_root + "/" + step_dir_name(n_ - save_every_);
    const std::string new_dir = ckpt_root + "/" + step_dir_name(n_);
    CKPT_ASSIGN_OR_RETURN(Manifest old_m, read_manifest_file(old_dir));
    CKPT_ASSIGN_OR_RETURN(Manifest new_m, read_manifest_file(new_dir));
    if (old_m.shards.empty() || new_m.shards.empty())
      return Status::corruption(new_dir + ": manifest lists no shards");
    const std::string from = old_dir + "/" + old_m.shards[0].path, to = new_dir + "/" + new_m.shards[0].path;
    std::error_code ec;
    fs::permissions(to, fs::perms::owner_write, fs::perm_options::add, ec);
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::io_error("stale-shard: copy " + from + " -> " + to + ": " + ec.message());
    add_check({"stale_shard_planted",
               "after-save",
               true,
               "copied " + from + " over " + to,
               {{"from", from}, {"to", to}}});
    return Status::ok();
  }

  // Runs `ckptcheck verify DIR --json`; false (with a failure recorded) if verify rejects it.
  Result<bool> verify(const std::string& checkpoint, const std::string& dir, KillMode mode, ModeOutcome* m) {
    const std::string name = fs::path(checkpoint).filename().string();
    CKPT_ASSIGN_OR_RETURN(
        ChildProcess child,
        ChildProcess::spawn({exe_, "verify", checkpoint, "--json"}, dir + "/verify-" + name + ".json",
                            dir + "/verify-" + name + ".stderr.log", true));
    const auto start = std::chrono::steady_clock::now();
    const ChildExit e = child.wait(o_.child_timeout_seconds);
    const double wall = seconds_since(start);
    if (e.timed_out) return Status::io_error("verify " + checkpoint + ": " + e.describe());
    const nlohmann::json j = parse_verify_output(child.captured_stdout());
    if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean())
      return Status::io_error("verify " + checkpoint + " gave no JSON result (" + e.describe() +
                              "): " + log_tail(child.stderr_log()));
    m->verify_seconds +=
        j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>() : wall;
    const bool ok = j["ok"].get<bool>() && e.exited && e.exit_code == 0;
    DrillCheck c{"verify", kill_mode_name(mode), ok, "", {}};
    c.numbers = {{"checkpoint", checkpoint}, {"exit", e.describe()}, {"wall_seconds", wall}, {"result", j}};
    c.detail = ok ? name + " verified" : verify_failure(checkpoint, j, e);
    add_check(c, c.detail);
    return ok;
  }

  // The checkpoint the resume will use, through the readers `inspect` and `diff` use: a checkpoint
  // they cannot read is reported, never skipped.
  Result<bool> read_checkpoint(const std::string& checkpoint, KillMode mode) {
    auto snap = read_state_snapshot(checkpoint);
    DrillCheck c{"checkpoint_readable", kill_mode_name(mode), snap.is_ok(), "", {{"checkpoint", checkpoint}}};
    if (!snap.is_ok()) {
      c.detail = "the readers cannot read " + checkpoint + ": " + snap.status().message();
    } else {
      c.detail = std::to_string(snap->tensors.size()) + " tensors, " + std::to_string(snap->values.size()) +
                 " other values read from " + fs::path(checkpoint).filename().string();
      if (!snap->unreadable.empty()) {
        c.detail += "; not readable (not compared): ";
        for (const auto& u : snap->unreadable) c.detail += u + "; ";
      }
      c.numbers["unreadable"] = snap->unreadable;
    }
    add_check(c, c.detail);
    return snap.is_ok();
  }

  // "verify failed on step_00000004: shard shard-00000-of-00002.cks (holds model, optimizer
  // tensors): <first error>" — names what a user has to look at.
  std::string verify_failure(const std::string& checkpoint, const nlohmann::json& j, const ChildExit& e) {
    std::string m = "verify failed on " + fs::path(checkpoint).filename().string();
    const auto& errors =
        j.contains("errors") && j["errors"].is_array() ? j["errors"] : nlohmann::json::array();
    if (errors.empty()) return m + " (" + e.describe() + ", no errors listed)";
    std::set<std::string> shards;
    for (const auto& err : errors)
      if (err.is_object() && err.contains("shard") && err["shard"].is_string() &&
          !err["shard"].get<std::string>().empty())
        shards.insert(fs::path(err["shard"].get<std::string>()).filename().string());
    std::set<std::string> components;
    auto manifest = read_manifest_file(checkpoint);
    for (const auto& shard : shards) {
      m += ": shard " + shard;
      if (!manifest.is_ok()) continue;
      for (size_t i = 0; i < manifest->shards.size(); ++i) {
        if (fs::path(manifest->shards[i].path).filename() != shard) continue;
        for (const auto& t : manifest->tensors)
          for (const auto& c : t.chunks)
            if (c.shard == i) components.insert(t.component);
      }
    }
    for (const auto& err : errors)  // without a manifest, a tensor name's prefix is its component
      if (err.is_object() && err.contains("tensor") && err["tensor"].is_string()) {
        const std::string t = err["tensor"].get<std::string>();
        if (!t.empty() && !manifest.is_ok()) components.insert(t.substr(0, t.find('.')));
      }
    if (!components.empty()) {
      std::string list;
      for (const auto& c : components) list += (list.empty() ? "" : ", ") + c;
      m += " (holds " + list + " tensors)";
    }
    const auto& first = errors[0];
    if (first.is_object() && first.contains("message") && first["message"].is_string())
      m += ": " + first["message"].get<std::string>();
    if (errors.size() > 1) m += " (+" + std::to_string(errors.size() - 1) + " more)";
    return m;
  }

  // A fresh process resumed from `from`; false (a failure recorded) when it does not finish.
  Result<bool> resume(KillMode mode, const std::string& dir, const CheckpointEvent& from, ModeOutcome* m) {
    phase(std::string("resume (") + kill_mode_name(mode) + ")");
    std::vector<std::string> extra;
    if (!o_.inject.empty() && o_.inject != kStaleShardInject) extra = {"--inject", o_.inject};
    const ProgramRun run = run_of("resumed", dir + "/resumed", from.path);
    CKPT_RETURN_IF_ERROR(make_directory(dir + "/resumed"));
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child,
                          start(run, dir + "/resumed", Shape::kResumed, extra));
    RunWatch watch(child->local_pid(), run.metrics);
    const ChildExit e =
        wait_training(*child, std::string("resumed run (") + kill_mode_name(mode) + ")", run.metrics);
    if (e.ok()) resumed_timelines_.push_back(watch.stop());
    if (!e.ok()) {
      add_check({"resumed_run",
                 kill_mode_name(mode),
                 false,
                 "the resumed run failed (" + e.describe() + "): " + log_tail(dir + "/resumed/stderr.log"),
                 {{"exit", e.describe()}, {"resume", from.path}}});
      return false;
    }
    CKPT_ASSIGN_OR_RETURN(resumed_log_, read_metrics_log(run.metrics));
    m->resumed_steps = resumed_log_.steps;
    m->resumed_from_step = from.step;
    const int64_t first = m->resumed_steps.empty() ? -1 : m->resumed_steps.front().step;
    add_check({"resumed_from",
               kill_mode_name(mode),
               first == from.step + 1,
               "resumed from " + fs::path(from.path).filename().string() + " (step " +
                   std::to_string(from.step) + "); first logged step " + std::to_string(first) +
                   ", expected " + std::to_string(from.step + 1),
               {{"expected_step", from.step}, {"first_logged_step", first}, {"resume", from.path}}});
    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(m->resumed_summary,
                            read_json_file(dir + "/resumed/summary.json", kMaxSummaryBytes));
      const auto& s = m->resumed_summary;
      const int64_t restored = s.contains("restored_step") && s["restored_step"].is_number_integer()
                                   ? s["restored_step"].get<int64_t>()
                                   : -1;
      add_check(
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

  Status compare(KillMode mode, const std::string& dir, ModeOutcome* m) {
    phase(std::string("compare (") + kill_mode_name(mode) + ")");
    const std::string mode_name = kill_mode_name(mode);
    const size_t first_failure_of_mode = out_.failures.size();
    bool identical = true;
    const int64_t expected_steps = n_ + k_ - m->resumed_from_step;
    for (auto d : compare_step_metrics(out_.reference_steps, m->resumed_steps, o_.tolerance)) {
      identical = identical && d.bit_identical;
      const bool noise = !d.passed && d.missing_steps.empty() && d.missing_field.empty() &&
                         within_envelope(series_envelope_, d.field, d.max_abs);
      const bool complete = d.field != "loss" || d.steps_compared == expected_steps;
      DrillCheck c{"metric_" + d.field, mode_name, (d.passed || noise) && complete, "", to_json(d)};
      if (d.first_diverging_step >= 0)
        c.detail =
            d.field + " diverged at step " + std::to_string(d.first_diverging_step) + ": reference " +
            format_number(d.reference_at_first) + " resumed " + format_number(d.resumed_at_first) +
            " (max abs " + format_number(d.max_abs) + ")" +
            (noise ? ", within " + format_number(o_.control_multiple) + "x the run-to-run envelope" : "");
      else if (!d.missing_field.empty())
        c.detail = d.field + ": the resumed run stopped logging it (first at step " +
                   std::to_string(d.missing_field.front()) + ")";
      else if (!complete || !d.missing_steps.empty())
        c.detail = d.field + ": compared " + std::to_string(d.steps_compared) + " steps, expected " +
                   std::to_string(expected_steps);
      else
        c.detail =
            d.field + ": " + std::to_string(d.steps_compared) + " steps, max abs " + format_number(d.max_abs);
      add_check(c, c.detail);
    }

    if (built_in()) {
      CKPT_ASSIGN_OR_RETURN(const double ref_eval, eval_mean_loss(out_.reference_summary, "reference"));
      CKPT_ASSIGN_OR_RETURN(const double got_eval, eval_mean_loss(m->resumed_summary, "resumed run"));
      const bool eval_ok = within_tolerance(ref_eval, got_eval, o_.tolerance) ||
                           within_envelope(series_envelope_, "loss", std::fabs(ref_eval - got_eval));
      identical = identical && ref_eval == got_eval;
      add_check(
          {"eval_loss",
           mode_name,
           eval_ok,
           "eval loss reference " + format_number(ref_eval) + " resumed " + format_number(got_eval),
           {{"reference", ref_eval}, {"resumed", got_eval}, {"abs_diff", std::fabs(ref_eval - got_eval)}}},
          "eval diverged: mean loss reference " + format_number(ref_eval) + " resumed " +
              format_number(got_eval));
      CKPT_ASSIGN_OR_RETURN(LoadedTensor logits, read_eval_logits(dir + "/resumed/eval"));
      const TensorDiff ld = compare_tensor(reference_logits_.view(), logits.view(), o_.tolerance);
      identical = identical && ld.bit_identical();
      add_check(
          {"eval_logits", mode_name,
           ld.passed() || (ld.mismatch.empty() && within_envelope(component_envelope_, "model", ld.max_abs)),
           std::to_string(ld.elements) + " logits, max abs " + format_number(ld.max_abs), to_json(ld)},
          "eval diverged: eval.logits " +
              (ld.mismatch.empty()
                   ? "max abs " + format_number(ld.max_abs) + " at " + shape_to_string(ld.max_abs_index)
                   : ld.mismatch));
    }

    auto final_state = final_snapshot(resumed_log_, "the resumed run");
    add_check({"final_checkpoint_step",
               mode_name,
               final_state.is_ok(),
               final_state.is_ok() ? "resumed run's final checkpoint " + final_state->path
                                   : final_state.status().message(),
               {{"step", n_ + k_}}});
    if (!final_state.is_ok()) {
      m->compared = false;
      return Status::ok();
    }
    StateSnapshot reference = reference_snapshot_;
    drop_unmatched_rng(reference, *final_state);
    m->components = compare_snapshots(reference, *final_state, o_.tolerance);
    // Diverging components are reported first: they say which piece of state the restore lost.
    std::vector<std::string> divergences;
    for (auto& [name, c] : m->components) {
      identical = identical && c.bit_identical;
      if (!c.passed && c.first_mismatch.empty() && within_envelope(component_envelope_, name, c.max_abs))
        c.passed = true;  // within the run-to-run noise of this program
      if (!c.passed) divergences.push_back(c.divergence_message());
    }
    for (auto it = divergences.rbegin(); it != divergences.rend(); ++it)
      out_.failures.insert(out_.failures.begin() + static_cast<std::ptrdiff_t>(first_failure_of_mode),
                           *it + " (" + mode_name + " kill)");
    // Recorded without add_check: each divergence is already a failure line of its own.
    out_.checks.push_back({"final_state",
                           mode_name,
                           divergences.empty(),
                           divergences.empty()
                               ? std::to_string(m->components.size()) + " components match"
                               : std::to_string(divergences.size()) + " component(s) diverged",
                           {{"components", m->components.size()}, {"diverged", divergences}}});
    m->compared = true;
    m->bit_identical = identical;
    return Status::ok();
  }

  // Damages a copy of the step-N checkpoint, relaunches from it and classifies what the program did.
  Status run_fault(const std::string& fault, const CheckpointEvent& checkpoint,
                   const CheckpointEvent& older) {
    phase("fault " + fault);
    const std::string dir = work_ + "/faults/" + fault;
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    const fs::path source = checkpoint.path;
    const fs::path copy = fs::path(dir) / source.filename();
    std::error_code ec;
    fs::copy(source, copy, fs::copy_options::recursive, ec);
    if (ec) return Status::io_error("fault " + fault + ": copy " + source.string() + ": " + ec.message());
    std::vector<fs::path> files = checkpoint_files(copy);
    if (files.empty()) return Status::corruption(source.string() + ": the checkpoint holds no file");
    std::string damage;
    if (fault == "truncate") {
      const uint64_t size = file_size_of(files[0]);
      fs::resize_file(files[0], size / 2, ec);
      damage = "cut " + files[0].filename().string() + " from " + std::to_string(size) + " to " +
               std::to_string(size / 2) + " bytes";
    } else if (fault == "bitflip") {
      CKPT_ASSIGN_OR_RETURN(damage, flip_payload_byte(files[0]));
    } else if (fault == "drop-file") {
      if (files.size() < 2) {
        add_check({"fault_" + fault, "", true, "not applicable: the checkpoint is a single file", {}});
        return Status::ok();
      }
      const fs::path victim = pick_state_file(files);
      fs::remove(victim, ec);
      damage = "deleted " + fs::relative(victim, copy, ec).string();
    } else {  // stale-file
      const std::vector<fs::path> old_files = checkpoint_files(older.path);
      if (fs::is_regular_file(copy)) {
        fs::copy_file(older.path, copy, fs::copy_options::overwrite_existing, ec);
        damage =
            "replaced " + copy.filename().string() + " by the step-" + std::to_string(older.step) + " file";
      } else {
        const fs::path victim = pick_state_file(files);
        const fs::path rel = fs::relative(victim, copy, ec);
        const fs::path stale = fs::path(older.path) / rel;
        fs::copy_file(stale, victim, fs::copy_options::overwrite_existing, ec);
        damage =
            "swapped in " + rel.string() + " from the step-" + std::to_string(older.step) + " checkpoint";
      }
    }
    if (ec) return Status::io_error("fault " + fault + ": " + ec.message());

    const ProgramRun run = run_of("resumed", dir, copy.string());
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child, start(run, dir, Shape::kResumed));
    const ChildExit e = wait_training(*child, "fault " + fault, run.metrics);
    auto log = read_metrics_log(run.metrics);
    const size_t steps = log.is_ok() ? log->steps.size() : 0;
    FaultResult r;
    r.fault = fault;
    if (!e.ok() && steps == 0) {
      r.outcome = FaultOutcome::kRefused;
      r.detail =
          damage + "; the program refused it (" + e.describe() + "): " + log_tail(dir + "/stderr.log", 200);
    } else {
      bool diverged = !e.ok() || !log.is_ok();
      if (!diverged) {
        for (const auto& d : compare_step_metrics(out_.reference_steps, log->steps, o_.tolerance))
          diverged = diverged || !d.passed;
        auto final_state = final_snapshot(*log, "the fault run");
        if (!final_state.is_ok()) {
          diverged = true;
        } else {
          for (const auto& [name, c] : compare_snapshots(reference_snapshot_, *final_state, o_.tolerance))
            diverged = diverged || !c.passed;
        }
      }
      r.outcome = diverged ? FaultOutcome::kSilentDivergence : FaultOutcome::kSilentMatch;
      r.detail = damage + "; the program resumed without complaint (" + std::to_string(steps) +
                 " steps logged, " + e.describe() + ") and " +
                 (diverged ? "diverged from the reference" : "matched the reference");
      r.would_catch = fault_would_catch(built_in());
    }
    const bool refused = r.outcome == FaultOutcome::kRefused;
    add_check({"fault_" + fault,
               "",
               refused,
               std::string(fault_outcome_name(r.outcome)) + ": " + r.detail,
               {{"outcome", fault_outcome_name(r.outcome)},
                {"damage", damage},
                {"exit", e.describe()},
                {"steps_logged", steps}}},
              "fault " + fault + ": " + fault_outcome_name(r.outcome) + ": " + r.detail +
                  (refused ? "" : "; would have been caught by " + r.would_catch));
    out_.faults.push_back(std::move(r));
    return Status::ok();
  }

  Status run_mode(KillMode mode) {
    const std::string dir = work_ + "/" + kill_mode_name(mode);
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    ModeOutcome m;
    m.mode = mode;
    Status s = run_mode_steps(mode, dir, &m);
    out_.modes.push_back(std::move(m));
    return s;
  }

  Status run_mode_steps(KillMode mode, const std::string& dir, ModeOutcome* m) {
    CKPT_ASSIGN_OR_RETURN(CheckpointEvent from, kill_subject(mode, dir));
    if (mode == KillMode::kAfterSave) after_save_checkpoint_ = from;
    const std::string root = dir + "/ckpt";
    if (built_in() && mode == KillMode::kDuringSave) CKPT_RETURN_IF_ERROR(check_torn_save(root));
    if (built_in() && mode == KillMode::kAfterSave && o_.inject == kStaleShardInject)
      CKPT_RETURN_IF_ERROR(plant_stale_shard(root));
    phase(std::string("read checkpoint (") + kill_mode_name(mode) + ")");
    // A checkpoint that fails its check is not resumed: the drill has its answer, and resuming a
    // corrupt checkpoint would only fail again, less clearly.
    CKPT_ASSIGN_OR_RETURN(bool usable,
                          built_in() ? verify(from.path, dir, mode, m) : read_checkpoint(from.path, mode));
    if (!usable) return Status::ok();
    CKPT_ASSIGN_OR_RETURN(bool resumed, resume(mode, dir, from, m));
    if (!resumed) return Status::ok();
    CKPT_RETURN_IF_ERROR(finish_reference());
    return compare(mode, dir, m);
  }

  Status run_faults() {
    if (o_.faults.empty()) return Status::ok();
    if (!after_save_checkpoint_) return Status::invalid_argument("--faults need the after-save kill");
    CKPT_RETURN_IF_ERROR(finish_reference());
    auto log = read_metrics_log(work_ + "/after-save/metrics.jsonl");
    CheckpointEvent older;
    if (log.is_ok())
      for (const auto& e : log->checkpoints)
        if (e.step == n_ - save_every_) older = e;
    if (older.path.empty())
      return Status::corruption("the subject announced no checkpoint of step " +
                                std::to_string(n_ - save_every_) + " for the stale-file fault");
    for (const auto& f : o_.faults) CKPT_RETURN_IF_ERROR(run_fault(f, *after_save_checkpoint_, older));
    return Status::ok();
  }

  Status run_all() {
    CKPT_RETURN_IF_ERROR(setup());
    // The reference is independent of the subject; they run side by side.
    CKPT_RETURN_IF_ERROR(start_reference());
    if (control_) CKPT_RETURN_IF_ERROR(run_control());
    for (KillMode mode : o_.modes) CKPT_RETURN_IF_ERROR(run_mode(mode));
    CKPT_RETURN_IF_ERROR(finish_reference());
    out_.measured =
        outside_measurements({reference_timeline_, resumed_timelines_, component_bytes(reference_snapshot_),
                              bytes_on_disk(reference_snapshot_.path), subject_world_size(o_)});
    return run_faults();
  }

  const DrillOptions& o_;
  Progress* progress_;
  DrillOutcome out_;
  int64_t n_ = 0, k_ = 0, save_every_ = 0;
  std::string config_path_, exe_, work_;
  bool control_ = false;
  // Declared before the runs: a Slurm allocation the drill took outlives every step in it.
  std::optional<SlurmAllocation> allocation_;
  long long steps_started_ = 0;
  std::unique_ptr<RunningProgram> reference_, control_child_;
  bool reference_done_ = false;
  StateSnapshot reference_snapshot_;
  LoadedTensor reference_logits_;
  MetricsLog resumed_log_;
  std::unique_ptr<RunWatch> reference_watch_;  // what the drill measures of the runs from outside
  RunTimeline reference_timeline_;
  std::vector<RunTimeline> resumed_timelines_;
  std::optional<CheckpointEvent> after_save_checkpoint_;
  std::map<std::string, double> series_envelope_, component_envelope_;
  long long phase_done_ = 0, phase_total_ = 1;
};

}  // namespace

DrillOutcome run_resume_drill(const DrillOptions& options, Progress* progress) {
  return ResumeDrill(options, progress).run();
}

}  // namespace ckpt
