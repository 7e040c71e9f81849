#include "verifier/drill/drill.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/progress.h"
#include "fixtures/pilot_config.h"
#include "formats/native_shard.h"
#include "formats/tensor_file.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "shards/manifest.h"
#include "verifier/drill/pilot_rules.h"
#include "verifier/process/child_process.h"

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

bool changes_world_size(const DrillOptions& o) {
  const int subject = std::max(o.nproc, 1);
  const int resumed = o.resume_nproc > 0 ? o.resume_nproc : subject;
  return subject != resumed;
}

namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

constexpr uint64_t kMaxSummaryBytes = 64u << 20;

Result<LoadedTensor> read_eval_logits(const std::string& eval_dir) {
  const std::string path = eval_dir + "/logits.cks";
  CKPT_ASSIGN_OR_RETURN(auto file, open_native_shard_file(path));
  if (file->chunks().size() != 1) return Status::corruption(path + ": expected one tensor (eval.logits)");
  const ChunkInfo& c = file->chunks()[0];
  CKPT_ASSIGN_OR_RETURN(auto bytes, read_whole_chunk(*file, 0));
  return LoadedTensor{c.name, c.component, c.dtype, c.shape, std::move(bytes)};
}

struct LoadedCheckpoint {
  std::string dir;
  Manifest manifest;
  std::vector<LoadedTensor> tensors;
};

Result<LoadedCheckpoint> load_latest(const std::string& root) {
  LoadedCheckpoint c;
  CKPT_ASSIGN_OR_RETURN(c.dir, resolve_latest_checkpoint(root));
  CKPT_ASSIGN_OR_RETURN(c.manifest, read_manifest_file(c.dir));
  CKPT_ASSIGN_OR_RETURN(c.tensors, load_checkpoint_tensors(c.dir, c.manifest));
  return c;
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

class ResumeDrill {
 public:
  ResumeDrill(const DrillOptions& options, Progress* progress) : o_(options), progress_(progress) {}

  DrillOutcome run() {
    const auto start = std::chrono::steady_clock::now();
    Status s;
    try {
      s = run_all();
    } catch (const std::exception& e) {  // a malformed child summary must not crash the drill
      s = Status::io_error(std::string("drill: ") + e.what());
    }
    if (reference_.has_value()) reference_->kill_and_reap();
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

  Status setup() {
    CKPT_ASSIGN_OR_RETURN(PilotConfig config, load_pilot_config(o_.config_path));
    if (!o_.long_run_path.empty()) {
      CKPT_ASSIGN_OR_RETURN(PilotConfig long_run, load_pilot_config(o_.long_run_path));
      CKPT_RETURN_IF_ERROR(check_pilot_rules(config, long_run));
    }
    out_.config = config.resolved();
    n_ = o_.save_at < 0 ? config.steps / 2 : o_.save_at;
    k_ = o_.resume_steps < 0 ? n_ : o_.resume_steps;
    out_.save_at = n_;
    out_.resume_steps = k_;
    if (n_ < 1 || k_ < 1)
      return Status::invalid_argument("--save-at and --resume-steps must be >= 1 (got N=" +
                                      std::to_string(n_) + ", K=" + std::to_string(k_) + ")");
    const bool needs_half = o_.inject == kStaleShardInject ||
                            std::count(o_.modes.begin(), o_.modes.end(), KillMode::kDuringSave) > 0;
    // The earlier save is at N/2 and saves come every N/2 steps, so N/2 must divide N.
    if (needs_half && (n_ < 2 || n_ % 2 != 0))
      return Status::invalid_argument("--save-at must be even and >= 2 for during-save or stale-shard (got " +
                                      std::to_string(n_) + ")");
    if (!o_.inject.empty() && !is_known_drill_inject(o_.inject))
      return Status::invalid_argument("--inject: unknown negative control '" + o_.inject + "'");
    if (o_.inject == kStaleShardInject && o_.modes.size() == 1 && o_.modes[0] == KillMode::kDuringSave)
      return Status::invalid_argument(
          "--inject stale-shard needs an after-save kill (--kill after-save|both)");
    if (o_.shards < 1) return Status::invalid_argument("--shards must be >= 1");
    std::error_code ec;
    config_path_ = fs::absolute(o_.config_path, ec).string();
    exe_ = o_.executable;
    if (exe_.empty()) {
      CKPT_ASSIGN_OR_RETURN(exe_, current_executable());
    }
    std::string parent = o_.work_dir;
    if (parent.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      parent = tmp && *tmp ? tmp : "/tmp";
    }
    CKPT_RETURN_IF_ERROR(make_directory(parent));
    // A fresh dir per drill: `--resume latest` must never find a checkpoint of an earlier drill.
    std::string pattern = parent + "/ckptcheck-drill-XXXXXX";
    if (!::mkdtemp(pattern.data())) return Status::io_error(parent + ": cannot create a scratch dir");
    work_ = pattern;
    out_.work_dir = work_;
    phase_total_ = 1 + static_cast<long long>(o_.modes.size()) * 4;
    if (o_.nproc > 0 || o_.resume_nproc > 0) {
      const int subject = std::max(o_.nproc, 1);
      add_check({"world_sizes",
                 "",
                 true,
                 "subject and reference " + std::to_string(subject) + " rank(s), resumed " +
                     std::to_string(resume_nproc() > 0 ? resume_nproc() : 1) + " rank(s); tolerance rtol " +
                     std::to_string(o_.tolerance.rtol) + " atol " + std::to_string(o_.tolerance.atol) +
                     (changes_world_size(o_) ? " (across world sizes: rng component not compared)" : ""),
                 {{"subject_ranks", subject},
                  {"resumed_ranks", resume_nproc() > 0 ? resume_nproc() : 1},
                  {"rtol", o_.tolerance.rtol},
                  {"atol", o_.tolerance.atol}}});
    }
    return Status::ok();
  }

  // nproc > 0: the run goes through the launcher, so a SIGKILL of the child (the launcher) takes
  // every rank with it (the ranks die with their parent).
  std::vector<std::string> train_args(const std::string& ckpt_dir, int nproc) const {
    std::vector<std::string> args = {exe_};
    if (nproc > 0) {
      for (const std::string& a :
           {std::string("launch"), std::string("--nproc-per-node"), std::to_string(nproc), std::string("--")})
        args.push_back(a);
    }
    for (const std::string& a :
         {std::string("train"), std::string("--config"), config_path_, std::string("--ckpt-dir"), ckpt_dir,
          std::string("--shards"), std::to_string(o_.shards), std::string("--format"), o_.format,
          std::string("--steps"), std::to_string(n_ + k_)})
      args.push_back(a);
    return args;
  }
  std::vector<std::string> train_args(const std::string& ckpt_dir) const {
    return train_args(ckpt_dir, o_.nproc);
  }
  int resume_nproc() const { return o_.resume_nproc > 0 ? o_.resume_nproc : o_.nproc; }

  Status start_reference() {
    const std::string dir = work_ + "/reference";
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    auto args = train_args(dir + "/ckpt");
    for (const char* a : {"--save-final", "--measure-memory"}) args.push_back(a);
    for (const auto& a : std::vector<std::string>{"--eval-out", dir + "/eval", "--summary",
                                                  dir + "/summary.json", "--metrics", dir + "/metrics.jsonl"})
      args.push_back(a);
    CKPT_ASSIGN_OR_RETURN(ChildProcess child,
                          ChildProcess::spawn(args, dir + "/stdout.log", dir + "/stderr.log", false));
    reference_.emplace(std::move(child));
    return Status::ok();
  }

  Status finish_reference() {
    if (reference_done_) return Status::ok();
    phase("reference run");
    const ChildExit e = reference_->wait(o_.child_timeout_seconds);
    reference_done_ = true;
    const std::string dir = work_ + "/reference";
    if (!e.exited || e.exit_code != 0)
      return Status::io_error("reference run failed (" + e.describe() +
                              "): " + log_tail(dir + "/stderr.log"));
    CKPT_ASSIGN_OR_RETURN(out_.reference_summary, read_json_file(dir + "/summary.json", kMaxSummaryBytes));
    CKPT_ASSIGN_OR_RETURN(out_.reference_steps, read_step_metrics(dir + "/metrics.jsonl"));
    CKPT_ASSIGN_OR_RETURN(reference_ckpt_, load_latest(dir + "/ckpt"));
    CKPT_ASSIGN_OR_RETURN(reference_logits_, read_eval_logits(dir + "/eval"));
    out_.pins = reference_ckpt_.manifest.pins;
    return Status::ok();
  }

  // The subject trains and is SIGKILLed while held at its step-N save.
  Status kill_subject(KillMode mode, const std::string& dir) {
    const bool half_saves = mode == KillMode::kDuringSave || o_.inject == kStaleShardInject;
    auto args = train_args(dir + "/ckpt");
    for (const auto& a : std::vector<std::string>{
             "--save-every", std::to_string(half_saves ? n_ / 2 : n_), "--drill-hold", kill_mode_name(mode),
             "--drill-hold-step", std::to_string(n_), "--metrics", dir + "/subject-metrics.jsonl"})
      args.push_back(a);
    phase(std::string("subject (") + kill_mode_name(mode) + ")");
    CKPT_ASSIGN_OR_RETURN(ChildProcess subject, ChildProcess::spawn(args, dir + "/subject-stdout.log",
                                                                    dir + "/subject-stderr.log", true));
    const std::string event = mode == KillMode::kAfterSave ? "committed" : "shard-written";
    const std::string held_dir = step_dir_name(n_);
    std::string detail;
    for (;;) {  // the step-N/2 save also announces "committed"; only the held step counts
      auto got = subject.wait_for_event(event, o_.child_timeout_seconds);
      if (!got.is_ok()) {
        const ChildExit e = subject.running() ? subject.kill_and_reap() : ChildExit{};
        return Status::io_error(std::string("subject (") + kill_mode_name(mode) +
                                ") never reached its hold at step " + std::to_string(n_) + ": " +
                                got.status().message() + "; " + e.describe() + "; " +
                                log_tail(subject.stderr_log()));
      }
      detail = *got;
      if (event == "shard-written" || detail.find(held_dir) != std::string::npos) break;
    }
    const ChildExit e = subject.kill_and_reap();
    DrillCheck c{"subject_killed", kill_mode_name(mode), e.killed_by(SIGKILL), "", {}};
    c.detail = "SIGKILLed while held at step " + std::to_string(n_) + " (" + event + " " + detail +
               "): " + e.describe();
    c.numbers = {
        {"step", n_}, {"event", event}, {"path", detail}, {"signal", e.signal}, {"exit", e.describe()}};
    if (!c.passed) return Status::io_error("subject did not die of SIGKILL: " + e.describe());
    add_check(c);
    return Status::ok();
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
    const std::string want = step_dir_name(n_ / 2);
    const std::string got =
        latest.is_ok() ? fs::path(*latest).filename().string() : latest.status().message();
    add_check({"latest_skips_torn",
               "during-save",
               got == want,
               "resolve_latest_checkpoint -> " + got + ", expected " + want,
               {{"expected_step", n_ / 2}, {"resolved", got}}});
    return Status::ok();
  }

  // Invariant: this only ever touches the drill's own scratch checkpoint under work_, never a
  // user's checkpoint: it is the stale-shard negative control (a shard left over from an older
  // save, with the right name but the wrong bytes).
  Status plant_stale_shard(const std::string& ckpt_root) {
    const std::string old_dir = ckpt_root + "/" + step_dir_name(n_ / 2);
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
    phase(std::string("verify (") + kill_mode_name(mode) + ")");
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
                              "; is `verify` registered in this build?): " + log_tail(child.stderr_log()));
    m->verify_seconds +=
        j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>() : wall;
    const bool ok = j["ok"].get<bool>() && e.exited && e.exit_code == 0;
    DrillCheck c{"verify", kill_mode_name(mode), ok, "", {}};
    c.numbers = {{"checkpoint", checkpoint}, {"exit", e.describe()}, {"wall_seconds", wall}, {"result", j}};
    c.detail = ok ? name + " verified" : verify_failure(checkpoint, j, e);
    add_check(c, c.detail);
    return ok;
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

  Status resume(KillMode mode, const std::string& dir, int64_t expected_step, ModeOutcome* m) {
    phase(std::string("resume (") + kill_mode_name(mode) + ")");
    auto args = train_args(dir + "/ckpt", resume_nproc());
    for (const auto& a : std::vector<std::string>{"--resume", "latest", "--save-final", "--eval-out",
                                                  dir + "/eval", "--summary", dir + "/resumed-summary.json",
                                                  "--metrics", dir + "/resumed-metrics.jsonl"})
      args.push_back(a);
    if (!o_.inject.empty() && o_.inject != kStaleShardInject) {
      args.push_back("--inject");
      args.push_back(o_.inject);
    }
    CKPT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(args, dir + "/resumed-stdout.log",
                                                                  dir + "/resumed-stderr.log", false));
    const ChildExit e = child.wait(o_.child_timeout_seconds);
    if (!e.exited || e.exit_code != 0)
      return Status::io_error(std::string("resumed run (") + kill_mode_name(mode) + ") failed (" +
                              e.describe() + "): " + log_tail(dir + "/resumed-stderr.log"));
    CKPT_ASSIGN_OR_RETURN(m->resumed_summary,
                          read_json_file(dir + "/resumed-summary.json", kMaxSummaryBytes));
    const auto& s = m->resumed_summary;
    m->resumed_from_step = s.contains("restored_step") && s["restored_step"].is_number_integer()
                               ? s["restored_step"].get<int64_t>()
                               : -1;
    add_check(
        {"resumed_from",
         kill_mode_name(mode),
         m->resumed_from_step == expected_step,
         "restored step " + std::to_string(m->resumed_from_step) + ", expected " +
             std::to_string(expected_step),
         {{"expected_step", expected_step},
          {"restored_step", m->resumed_from_step},
          {"restore_seconds", s.contains("restore_seconds") ? s["restore_seconds"] : nlohmann::json()}}});
    CKPT_ASSIGN_OR_RETURN(m->resumed_steps, read_step_metrics(dir + "/resumed-metrics.jsonl"));
    return Status::ok();
  }

  Status compare(KillMode mode, const std::string& dir, ModeOutcome* m) {
    phase(std::string("compare (") + kill_mode_name(mode) + ")");
    const std::string mode_name = kill_mode_name(mode);
    const size_t first_failure_of_mode = out_.failures.size();
    bool identical = true;
    const auto series = compare_step_metrics(out_.reference_steps, m->resumed_steps, o_.tolerance);
    const int64_t expected_steps = n_ + k_ - m->resumed_from_step;
    for (const auto& d : series) {
      identical = identical && d.bit_identical;
      DrillCheck c{"metric_" + d.field, mode_name, d.passed && d.steps_compared == expected_steps, "",
                   to_json(d)};
      if (d.first_diverging_step >= 0)
        c.detail = d.field + " diverged at step " + std::to_string(d.first_diverging_step) + ": reference " +
                   format_number(d.reference_at_first) + " resumed " + format_number(d.resumed_at_first) +
                   " (max abs " + format_number(d.max_abs) + ")";
      else if (!c.passed)
        c.detail = d.field + ": compared " + std::to_string(d.steps_compared) + " steps, expected " +
                   std::to_string(expected_steps);
      else
        c.detail =
            d.field + ": " + std::to_string(d.steps_compared) + " steps, max abs " + format_number(d.max_abs);
      add_check(c, c.detail);
    }

    CKPT_ASSIGN_OR_RETURN(const double ref_eval, eval_mean_loss(out_.reference_summary, "reference"));
    CKPT_ASSIGN_OR_RETURN(const double got_eval, eval_mean_loss(m->resumed_summary, "resumed run"));
    const bool eval_ok = within_tolerance(ref_eval, got_eval, o_.tolerance);
    identical = identical && ref_eval == got_eval;
    add_check(
        {"eval_loss",
         mode_name,
         eval_ok,
         "eval loss reference " + format_number(ref_eval) + " resumed " + format_number(got_eval),
         {{"reference", ref_eval}, {"resumed", got_eval}, {"abs_diff", std::fabs(ref_eval - got_eval)}}},
        "eval diverged: mean loss reference " + format_number(ref_eval) + " resumed " +
            format_number(got_eval));

    CKPT_ASSIGN_OR_RETURN(LoadedTensor logits, read_eval_logits(dir + "/eval"));
    const TensorDiff ld = compare_tensor(reference_logits_.view(), logits.view(), o_.tolerance);
    identical = identical && ld.bit_identical();
    add_check({"eval_logits", mode_name, ld.passed(),
               std::to_string(ld.elements) + " logits, max abs " + format_number(ld.max_abs), to_json(ld)},
              "eval diverged: eval.logits " +
                  (ld.mismatch.empty()
                       ? "max abs " + format_number(ld.max_abs) + " at " + shape_to_string(ld.max_abs_index)
                       : ld.mismatch));

    CKPT_ASSIGN_OR_RETURN(LoadedCheckpoint final_ckpt, load_latest(dir + "/ckpt"));
    add_check({"final_checkpoint_step",
               mode_name,
               final_ckpt.manifest.step == n_ + k_,
               "resumed run's final checkpoint is step " + std::to_string(final_ckpt.manifest.step) +
                   ", expected " + std::to_string(n_ + k_),
               {{"dir", final_ckpt.dir}, {"step", final_ckpt.manifest.step}}});
    if (changes_world_size(o_)) {
      // Each rank has its own RNG stream (rng.cpu_state.rank<r>): across world sizes there is no
      // counterpart to compare with, so the rng component is left out and the report says so.
      auto drop_rng = [](std::vector<LoadedTensor>& ts) {
        ts.erase(
            std::remove_if(ts.begin(), ts.end(), [](const LoadedTensor& t) { return t.component == "rng"; }),
            ts.end());
      };
      drop_rng(reference_ckpt_.tensors);
      drop_rng(final_ckpt.tensors);
    }
    m->components = compare_states(reference_ckpt_.tensors, final_ckpt.tensors, o_.tolerance);
    // Diverging components are reported first: they say which piece of state the restore lost.
    std::vector<std::string> divergences;
    for (const auto& [name, c] : m->components) {
      identical = identical && c.bit_identical;
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
    CKPT_RETURN_IF_ERROR(kill_subject(mode, dir));
    const std::string root = dir + "/ckpt";
    if (mode == KillMode::kDuringSave) CKPT_RETURN_IF_ERROR(check_torn_save(root));
    const bool stale = mode == KillMode::kAfterSave && o_.inject == kStaleShardInject;
    if (stale) CKPT_RETURN_IF_ERROR(plant_stale_shard(root));
    const int64_t resume_step = mode == KillMode::kAfterSave ? n_ : n_ / 2;
    CKPT_ASSIGN_OR_RETURN(std::string checkpoint, resolve_latest_checkpoint(root));
    CKPT_ASSIGN_OR_RETURN(bool verified, verify(checkpoint, dir, mode, m));
    // A checkpoint verify rejected is not resumed: the drill has its answer, and resuming a
    // corrupt checkpoint would only fail again, less clearly.
    if (!verified) return Status::ok();
    CKPT_RETURN_IF_ERROR(resume(mode, dir, resume_step, m));
    CKPT_RETURN_IF_ERROR(finish_reference());
    return compare(mode, dir, m);
  }

  Status run_all() {
    CKPT_RETURN_IF_ERROR(setup());
    // The reference is independent of the subject (each child is single-threaded per the config).
    CKPT_RETURN_IF_ERROR(start_reference());
    for (KillMode mode : o_.modes) CKPT_RETURN_IF_ERROR(run_mode(mode));
    return finish_reference();
  }

  const DrillOptions& o_;
  Progress* progress_;
  DrillOutcome out_;
  int64_t n_ = 0, k_ = 0;
  std::string config_path_, exe_, work_;
  std::optional<ChildProcess> reference_;
  bool reference_done_ = false;
  LoadedCheckpoint reference_ckpt_;
  LoadedTensor reference_logits_;
  long long phase_done_ = 0, phase_total_ = 1;
};

}  // namespace

DrillOutcome run_resume_drill(const DrillOptions& options, Progress* progress) {
  return ResumeDrill(options, progress).run();
}

}  // namespace ckpt
