#include "verifier/drill/storage_fault_drill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "base/byte_units.h"
#include "base/file_io.h"
#include "base/sha256.h"
#include "faultfs/fault_mount.h"
#include "verifier/drill/held_kill_point.h"
#include "verifier/drill/missed_kill_point.h"
#include "verifier/drill/program_launcher.h"
#include "verifier/drill/resume_comparison.h"
#include "verifier/drill/run_measurements.h"
#include "verifier/drill/save_watch.h"
#include "verifier/process/child_process.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

namespace {

namespace fs = std::filesystem;

// How the mount's loss messages name its root: "ckpt/step_8.pt", "no fsync of ckpt/".
constexpr const char* kRootName = "ckpt";

struct LossLine {
  std::string path, message, missing_call;
};

std::vector<LossLine> parse_losses(const std::string& text) {
  std::vector<LossLine> out;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("losses") || !j["losses"].is_array()) return out;
  for (const auto& l : j["losses"])
    if (l.is_object())
      out.push_back({l.value("path", std::string()), l.value("message", std::string()),
                     l.value("missing_call", std::string())});
  return out;
}

// A checkpoint's files: relative path ("." for a one-file checkpoint) -> "SIZE SHA256", or
// "unreadable (...)". Empty when nothing is there.
using Contents = std::map<std::string, std::string>;

std::string digest_of(const std::string& path, uint64_t* size) {
  auto h = sha256_hex_of_file(path, size);
  return h.is_ok() ? std::to_string(*size) + " " + *h : "unreadable (" + h.status().message() + ")";
}

Contents contents_of(const std::string& path) {
  Contents c;
  std::error_code ec;
  uint64_t size = 0;
  if (fs::is_regular_file(path, ec)) {
    c["."] = digest_of(path, &size);
    return c;
  }
  if (!fs::is_directory(path, ec)) return c;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec))
      c[fs::relative(it->path(), path, fec).string()] = digest_of(it->path(), &size);
  }
  return c;
}

std::string size_of_digest(const std::string& d) {
  const size_t space = d.find(' ');
  if (d.rfind("unreadable", 0) == 0 || space == std::string::npos) return d;
  return byte_size_text(std::stod(d.substr(0, space)));
}

// What changed between two readings of one checkpoint, in words.
std::string describe_change(const std::string& name, const Contents& before, const Contents& after) {
  if (after.empty()) return name + " is gone";
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  for (const auto& [file, d] : before) {
    const std::string label = file == "." ? name : name + "/" + file;
    auto it = after.find(file);
    if (it == after.end())
      add(label + " missing");
    else if (it->second != d)
      add(label + " " + size_of_digest(d) + " -> " + size_of_digest(it->second) +
          (size_of_digest(d) == size_of_digest(it->second) ? " (other bytes)" : ""));
  }
  for (const auto& [file, d] : after)
    if (!before.count(file)) add(name + "/" + file + " appeared");
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

struct Fault {
  const StorageFaultSetup& s;
  std::string fault;
  std::unique_ptr<faultfs::FaultMount> mount;
  std::string ckpt;  // the mount point: the subject's and the relaunch's CKPTCHECK_CKPT_DIR

  // "ckpt/step_8" for DIR/ckpt/step_8: how the journal names a path under the mount.
  std::string journal_name(const std::string& path) const {
    const fs::path rel =
        fs::path(path).lexically_normal().lexically_relative(fs::path(ckpt).lexically_normal());
    if (rel.empty() || *rel.begin() == "..") return path;
    return rel == "." ? std::string(kRootName) : std::string(kRootName) + "/" + rel.string();
  }
  std::string short_name(const std::string& path) const { return fs::path(path).filename().string(); }

  Status start_mount() {
    const std::string backing = s.dir + "/backing", state = s.dir + "/faultfs-state";
    ckpt = s.dir + "/ckpt";
    CKPT_RETURN_IF_ERROR(make_directory(backing));
    CKPT_RETURN_IF_ERROR(make_directory(ckpt));
    faultfs::FaultMountOptions mo;
    mo.program = s.faultfs_program;
    mo.backing_dir = backing;
    mo.state_dir = state;
    mo.mountpoint = ckpt;
    mo.root_name = kRootName;
    auto started = faultfs::FaultMount::start(mo);
    if (!started.is_ok())
      return Status::io_error("fault " + fault + ": cannot mount ckptcheck-faultfs on " + ckpt + ": " +
                              started.status().message());
    mount = std::move(*started);
    return Status::ok();
  }

  ProgramRun run(const std::string& role, const std::string& resume) const {
    ProgramRun r;
    r.role = role;
    r.ckpt_dir = ckpt;
    r.steps = s.steps;
    r.save_every = s.save_every;
    r.metrics = s.dir + "/" + (role == "subject" ? "subject" : "resumed") + "/metrics.jsonl";
    r.resume = resume;
    return r;
  }

  Result<std::unique_ptr<RunningProgram>> start(const ProgramRun& r) {
    const std::string dir = parent_dir(r.metrics);
    CKPT_RETURN_IF_ERROR(make_directory(dir));
    return s.launcher->start(r, dir, r.role == "subject" ? RunShape::kSubject : RunShape::kResumed);
  }

  // The subject's run dir (an empty dir: its metrics file and logs go there) mounted for a held kill
  // point; null, with `why_not` saying why, where the kill modes would not hold either.
  std::unique_ptr<HeldKillPoint> mount_run_dir(const ProgramRun& r, std::string* why_not) {
    const std::string dir = parent_dir(r.metrics);
    *why_not = held_kill_point_unavailable(*s.options, s.faultfs_program);
    if (!why_not->empty()) return nullptr;
    if (Status made = make_directory(dir); !made.is_ok()) {
      *why_not = made.message();
      return nullptr;
    }
    auto mounted = HeldKillPoint::mount(s.faultfs_program, dir);
    if (mounted.is_ok()) return std::move(*mounted);
    *why_not = "cannot mount ckptcheck-faultfs: " + mounted.status().message();
    return nullptr;
  }

  // Starts the subject and SIGKILLs it at its step-N checkpoint event (power-loss, read-error). The
  // event is held where it can be (held_kill_point.h): the subject's run dir (its metrics file and
  // logs) on a ckptcheck-faultfs mount of its own, beside this fault's mount of its checkpoint dir,
  // so no program outruns the kill and the power loss never touches the log it is judged by.
  // `held_why_not` is "" when held, else why not; the kill then comes from the save watch.
  Result<WatchOutcome> kill_at_event(const ProgramRun& r, std::string* held_why_not) {
    std::unique_ptr<HeldKillPoint> held = mount_run_dir(r, held_why_not);
    if (held) CKPT_RETURN_IF_ERROR(held->arm(r, /*after_save=*/true, s.n));
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child, start(r));
    const double timeout = s.options->child_timeout_seconds;
    if (!held) return kill_after_checkpoint(*child, r.metrics, ckpt, s.n, timeout);
    CKPT_ASSIGN_OR_RETURN(WatchOutcome w, held->kill_when_held(*child, r, true, s.n, timeout, nullptr));
    CKPT_RETURN_IF_ERROR(held->finish());  // the log back at its path before anything reads it
    return w;
  }

  // Starts the subject and SIGKILLs it inside its step-N save, at the save's first change in its
  // checkpoint dir (power-loss-mid-save). Held where it can be, over two mounts: the run dir's holds
  // the first step line past the step N - every event (`after-step`), and while the program sleeps
  // there the drill arms this fault's mount of the checkpoint dir to hold its next change
  // (`first-change`), then lets the step line go. The kill so lands in the save however fast it is,
  // and the power loss still has the checkpoint dir's mount to itself.
  Result<WatchOutcome> kill_in_save(const ProgramRun& r, std::string* held_why_not) {
    const int64_t before = s.n - s.save_every;
    const double timeout = s.options->child_timeout_seconds;
    std::unique_ptr<HeldKillPoint> held = mount_run_dir(r, held_why_not);
    if (held) CKPT_RETURN_IF_ERROR(held->arm_after_step(r, before));
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child, start(r));
    if (!held) return kill_during_save(*child, r.metrics, ckpt, before, timeout);
    WatchOutcome w;
    CKPT_ASSIGN_OR_RETURN(
        const bool armed,
        held->release_when_held(
            *child, timeout, [&] { return mount->command("gate first-change /").status(); }, &w.exit));
    if (armed) {
      auto killed =
          held->kill_when_held_by(*mount, "/", *child, r, /*after_save=*/false, before, timeout, nullptr);
      // Disarmed whatever happened: the relaunch writes through the same mount.
      (void)mount->command("gate-release");
      CKPT_ASSIGN_OR_RETURN(w, std::move(killed));
    }
    CKPT_RETURN_IF_ERROR(held->finish());  // the log back at its path before anything reads it
    return w;
  }

  static void note_held(const std::string& why_not, nlohmann::json* numbers) {
    (*numbers)["held_by_faultfs"] = why_not.empty();
    if (!why_not.empty()) (*numbers)["not_held_because"] = why_not;
  }

  Status missed(const ProgramRun& r, const WatchOutcome& w, const std::string& mode, int64_t at) const {
    MissedKillPoint m;
    m.mode = mode;
    m.save_at = at;
    m.steps = r.steps;
    m.save_every = r.save_every;
    m.metrics = r.metrics;
    m.ckpt_dir = r.ckpt_dir;
    m.stderr_log = parent_dir(r.metrics) + "/stderr.log";
    m.exit = w.exit;
    m.timeout_seconds = s.options->child_timeout_seconds;
    return Status::io_error("fault " + fault + ": " + explain_missed_kill_point(m));
  }

  void record(FaultOutcome outcome, bool passed, const std::string& detail, const std::string& missing_call,
              nlohmann::json numbers) {
    FaultResult r;
    r.fault = fault;
    r.outcome = outcome;
    r.passed = passed;
    r.detail = detail;
    r.would_catch = missing_call;
    numbers["outcome"] = fault_outcome_name(outcome);
    DrillCheck c{"fault_" + fault, "", passed, std::string(fault_outcome_name(outcome)) + ": " + detail,
                 std::move(numbers)};
    c.skipped = outcome == FaultOutcome::kNotExercised;
    const std::string failure = "fault " + fault + ": " + fault_outcome_name(outcome) + ": " + detail +
                                (missing_call.empty() ? "" : "; would have been kept by: " + missing_call);
    s.record->add_check(std::move(c), failure);
    s.record->out.faults.push_back(std::move(r));
  }

  // The losses that touch `path` (its files, its name), their messages, and the calls that would
  // have kept them.
  void losses_of(const std::vector<LossLine>& losses, const std::string& path,
                 std::vector<std::string>* messages, std::vector<std::string>* missing) const {
    const std::string name = journal_name(path);
    std::set<std::string> seen;
    for (const auto& l : losses) {
      if (l.path != name && l.path.rfind(name + "/", 0) != 0) continue;
      messages->push_back(l.message);
      if (!l.missing_call.empty() && seen.insert(l.missing_call).second) missing->push_back(l.missing_call);
    }
  }

  struct Relaunch {
    ChildExit exit;
    MetricsLog log;
    std::string log_error;
    int64_t first_step = -1;
    std::string stderr_log;
  };

  // The relaunch in the subject's checkpoint dir as the fault left it, told to resume from `from`.
  Result<Relaunch> relaunch(const CheckpointEvent& from) {
    s.record->phase("fault " + fault + ": relaunch");
    const ProgramRun r = run("resumed", from.path);
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child, start(r));
    Relaunch out;
    out.exit =
        s.launcher->wait(*child, "fault " + fault + " relaunch", r.metrics, s.record->progress, s.steps);
    out.stderr_log = parent_dir(r.metrics) + "/stderr.log";
    auto log = read_metrics_log(r.metrics, ckpt);
    if (log.is_ok())
      out.log = std::move(*log);
    else
      out.log_error = log.status().message();
    if (!out.log.steps.empty()) out.first_step = out.log.steps.front().step;
    return out;
  }

  // "" when the relaunch matched the reference (every metric at every common step, the final
  // checkpoint); otherwise what diverged.
  std::string divergence(const Relaunch& r) const {
    if (!r.exit.ok()) return "it failed (" + r.exit.describe() + "): " + log_tail(r.stderr_log, 300);
    if (!r.log_error.empty()) return r.log_error;
    for (const auto& d : compare_step_metrics(*s.golden.steps, r.log.steps, s.golden.tolerance))
      if (!d.passed) return "metric " + d.field + " diverged (max abs " + format_number(d.max_abs) + ")";
    if (!s.golden.final_state) return "";
    auto final_state = announced_snapshot(r.log, s.golden.final_step, "the relaunch");
    if (!final_state.is_ok()) return final_state.status().message();
    for (const auto& [name, c] : compare_snapshots(*s.golden.final_state, *final_state, s.golden.tolerance))
      if (!c.passed)
        return "its final checkpoint's " + name + " diverged (max abs " + format_number(c.max_abs) + ")";
    return "";
  }

  // The verdict once `from` survived: the relaunch must resume from it and match.
  Status judge_relaunch(const CheckpointEvent& from, const std::string& survived, nlohmann::json numbers) {
    CKPT_ASSIGN_OR_RETURN(Relaunch r, relaunch(from));
    numbers["resume"] = from.path;
    numbers["relaunch_exit"] = r.exit.describe();
    numbers["relaunch_first_step"] = r.first_step;
    const std::string given = "the relaunch, given CKPTCHECK_RESUME=" + short_name(from.path);
    if (r.first_step < 0) {
      record(FaultOutcome::kRelaunchFailed, false,
             survived + "; " + given + ", logged no step (" + r.exit.describe() +
                 "): " + log_tail(r.stderr_log, 300),
             "", std::move(numbers));
    } else if (r.first_step == 1 && from.step > 0) {
      record(FaultOutcome::kFreshStart, false,
             survived + "; " + given + " (step " + std::to_string(from.step) +
                 "), started from scratch (first logged step 1)",
             "", std::move(numbers));
    } else if (r.first_step != from.step + 1) {
      record(FaultOutcome::kRelaunchFailed, false,
             survived + "; " + given + " (step " + std::to_string(from.step) + "), resumed at step " +
                 std::to_string(r.first_step - 1) + " (first logged step " + std::to_string(r.first_step) +
                 ")",
             "", std::move(numbers));
    } else if (const std::string why = divergence(r); !why.empty()) {
      record(FaultOutcome::kRelaunchFailed, false,
             survived + "; " + given + ", resumed from step " + std::to_string(from.step) + " and " + why, "",
             std::move(numbers));
    } else {
      record(FaultOutcome::kSurvived, true,
             survived + "; the relaunch resumed from step " + std::to_string(from.step) +
                 " and matched the reference",
             "", std::move(numbers));
    }
    return Status::ok();
  }

  Status power_loss(bool mid_save) {
    const ProgramRun r = run("subject", "");
    s.record->phase("fault " + fault + ": subject");
    WatchOutcome w;
    std::string held_why_not;
    if (!mid_save) {
      CKPT_ASSIGN_OR_RETURN(w, kill_at_event(r, &held_why_not));
      if (!w.triggered) return missed(r, w, "after-save", s.n);
    } else {
      CKPT_ASSIGN_OR_RETURN(w, kill_in_save(r, &held_why_not));
      if (!w.triggered) return missed(r, w, "during-save", s.n);
    }
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(r.metrics, ckpt));
    CheckpointEvent must = w.event;
    nlohmann::json numbers = {{"step", s.n}};
    note_held(held_why_not, &numbers);
    if (mid_save) {
      if (log.checkpoints.empty())
        return Status::io_error("fault " + fault + ": the subject announced no checkpoint before the step-" +
                                std::to_string(s.n) + " save");
      must = log.checkpoints.back();
      const int64_t last_step = log.steps.empty() ? -1 : log.steps.back().step;
      numbers["trigger"] = w.created;
      if (must.step >= s.n || last_step < s.n) {
        record(FaultOutcome::kNotExercised, false,
               "the power failed at step " + std::to_string(last_step) + " with " + short_name(must.path) +
                   " the last checkpoint announced (at the " + describe_save_trigger(w) +
                   "): not inside the step-" + std::to_string(s.n) + " save; give the save more time",
               "", std::move(numbers));
        return Status::ok();
      }
    }
    numbers["checkpoint"] = must.path;
    numbers["checkpoint_step"] = must.step;
    // What the program had written when the power failed: what its page cache held.
    const Contents before = contents_of(must.path);
    std::map<std::string, bool> older_before;
    for (const auto& e : log.checkpoints)
      if (e.step < must.step) older_before[e.path] = path_exists(e.path);
    s.record->phase("fault " + fault + ": power loss");
    CKPT_ASSIGN_OR_RETURN(const std::string losses_text, mount->power_loss());
    CKPT_RETURN_IF_ERROR(mount->recover());
    const std::vector<LossLine> losses = parse_losses(losses_text);
    std::vector<std::string> all;
    for (const auto& l : losses) all.push_back(l.message);
    numbers["losses"] = all;
    const Contents after = contents_of(must.path);
    const std::string name = short_name(must.path);
    const std::string what =
        mid_save ? name + ", the checkpoint announced before the step-" + std::to_string(s.n) + " save,"
                 : name + ", announced at step " + std::to_string(must.step) + ",";
    if (before.empty()) {
      record(FaultOutcome::kLost, false,
             what + " was no longer on disk when the power failed" +
                 (mid_save ? " (deleted before the step-" + std::to_string(s.n) + " save was whole)" : ""),
             "", std::move(numbers));
      return Status::ok();
    }
    if (before != after) {
      std::vector<std::string> messages, missing;
      losses_of(losses, must.path, &messages, &missing);
      if (messages.empty()) messages.push_back(describe_change(name, before, after));
      std::string detail = what + " did not survive the power loss: " + join(messages, "; ");
      // Did any announced checkpoint survive? A retention that deleted the older ones durably while
      // the new one was not leaves none.
      std::vector<std::string> deleted, lost;
      bool any = false;
      for (const auto& [path, existed] : older_before) {
        const bool now = path_exists(path);
        any = any || now;
        if (!now) (existed ? lost : deleted).push_back(short_name(path));
      }
      if (!any) {
        std::string why;
        if (!deleted.empty())
          why += join(deleted, ", ") + " deleted by the program before " + name + " was durable";
        if (!lost.empty()) why += (why.empty() ? "" : ", ") + join(lost, ", ") + " lost too";
        detail += "; no checkpoint survives" + (why.empty() ? "" : " (" + why + ")");
      }
      numbers["missing_calls"] = missing;
      record(FaultOutcome::kLost, false, detail, join(missing, ", "), std::move(numbers));
      return Status::ok();
    }
    return judge_relaunch(must, what + " survived the power loss whole", std::move(numbers));
  }

  Status disk_full() {
    const ProgramRun r = run("subject", "");
    s.record->phase("fault " + fault + ": subject");
    const int64_t prev_step = s.n - s.save_every;
    const uint64_t budget = std::max<uint64_t>(1, s.reference_save_bytes / 2);
    // The disk fills from the first step past the step N - every checkpoint on: held where it can be
    // (the run dir's mount holds that step line's write while ENOSPC is armed), so a program faster
    // than the drill's watch cannot save N, or finish, before the disk is full.
    std::string held_why_not;
    std::unique_ptr<HeldKillPoint> held = mount_run_dir(r, &held_why_not);
    if (held) CKPT_RETURN_IF_ERROR(held->arm_after_step(r, prev_step));
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RunningProgram> child, start(r));
    CheckpointEvent prev;
    Contents prev_before;
    WatchOutcome w;
    bool armed = false;
    const auto arm = [&](const std::string& metrics) -> Status {
      // The checkpoint before, as announced; then the disk fills halfway through the next save.
      CKPT_ASSIGN_OR_RETURN(MetricsLog before, read_metrics_log(metrics, ckpt));
      for (const auto& c : before.checkpoints)
        if (c.step == prev_step) prev = c;
      prev_before = contents_of(prev.path);
      return mount->enospc_after(budget);
    };
    if (held) {
      CKPT_ASSIGN_OR_RETURN(armed, held->release_when_held(
                                       *child, s.options->child_timeout_seconds,
                                       [&] { return arm(held->below(r.metrics)); }, &w.exit));
      armed = armed && !prev.path.empty();
    } else {
      MetricsTail tail(r.metrics, ckpt);
      const auto deadline =
          std::chrono::steady_clock::now() +
          std::chrono::milliseconds(static_cast<int64_t>(s.options->child_timeout_seconds * 1000));
      while (std::chrono::steady_clock::now() < deadline) {
        if (tail.poll_for_checkpoint(prev_step, &prev)) {
          armed = true;
          break;
        }
        if (child->try_reap(&w.exit)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (armed) CKPT_RETURN_IF_ERROR(arm(r.metrics));
    }
    if (!armed) {
      if (child->running()) {
        w.exit = child->kill_and_reap();
        w.exit.timed_out = true;
      }
      if (held) CKPT_RETURN_IF_ERROR(held->finish());
      return missed(r, w, "after-save", prev_step);
    }
    const ChildExit e =
        s.launcher->wait(*child, "fault disk-full subject", r.metrics, s.record->progress, s.steps);
    if (held) CKPT_RETURN_IF_ERROR(held->finish());  // the log back at its path before it is read
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(r.metrics, ckpt));
    std::optional<CheckpointEvent> announced_n;
    for (const auto& c : log.checkpoints)
      if (c.step == s.n) announced_n = c;
    nlohmann::json numbers = {{"step", s.n},
                              {"enospc_after_bytes", budget},
                              {"reference_save_bytes", s.reference_save_bytes},
                              {"subject_exit", e.describe()},
                              {"checkpoint", prev.path},
                              {"checkpoint_step", prev.step},
                              {"announced_step_n", announced_n.has_value()}};
    note_held(held_why_not, &numbers);
    std::string failed = "the step-" + std::to_string(s.n) + " save hit ENOSPC after " +
                         byte_size_text(static_cast<double>(budget)) + " and ";
    bool whole_n = false;
    if (announced_n) {
      const uint64_t bytes = bytes_on_disk(announced_n->path);
      numbers["announced_bytes"] = bytes;
      if (bytes < s.reference_save_bytes) {
        record(FaultOutcome::kAnnouncedIncomplete, false,
               failed + "the program announced " + short_name(announced_n->path) + " anyway (" +
                   e.describe() + "): " + byte_size_text(static_cast<double>(bytes)) +
                   " on disk, the reference's step-" + std::to_string(s.n) + " checkpoint holds " +
                   byte_size_text(static_cast<double>(s.reference_save_bytes)),
               "a save that raises on a failed write (and no checkpoint event after it)", std::move(numbers));
        return Status::ok();
      }
      whole_n = true;
      failed += "the program still saved it whole (" + short_name(announced_n->path) + ")";
    } else {
      failed += !e.ok() ? "the program stopped (" + e.describe() + ")" : "the program did not announce it";
    }
    const Contents prev_after = contents_of(prev.path);
    const std::string prev_name = short_name(prev.path);
    if (prev_before.empty() || prev_after != prev_before) {
      record(FaultOutcome::kLost, false,
             failed + ", but " + prev_name + ", the checkpoint before, was destroyed: " +
                 describe_change(prev_name, prev_before, prev_after),
             "write the new checkpoint to a new name and delete the old one only after the new one is whole",
             std::move(numbers));
      return Status::ok();
    }
    CKPT_RETURN_IF_ERROR(mount->clear_faults());
    return judge_relaunch(whole_n ? *announced_n : prev, failed + "; " + prev_name + " whole",
                          std::move(numbers));
  }

  Status read_error() {
    const ProgramRun r = run("subject", "");
    s.record->phase("fault " + fault + ": subject");
    std::string held_why_not;
    CKPT_ASSIGN_OR_RETURN(const WatchOutcome w, kill_at_event(r, &held_why_not));
    if (!w.triggered) return missed(r, w, "after-save", s.n);
    CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(r.metrics, ckpt));
    std::vector<std::string> files;
    for (const auto& [file, digest] : contents_of(w.event.path)) {
      const std::string path = file == "." ? w.event.path : w.event.path + "/" + file;
      const fs::path rel =
          fs::path(path).lexically_normal().lexically_relative(fs::path(ckpt).lexically_normal());
      CKPT_RETURN_IF_ERROR(mount->eio_read(rel.string()));
      files.push_back(rel.string());
    }
    if (files.empty())
      return Status::io_error("fault read-error: the announced checkpoint " + w.event.path +
                              " holds no file");
    std::set<int64_t> older;
    for (const auto& c : log.checkpoints)
      if (c.step < s.n && !contents_of(c.path).empty()) older.insert(c.step);
    CKPT_ASSIGN_OR_RETURN(Relaunch rl, relaunch(w.event));
    nlohmann::json numbers = {{"step", s.n},
                              {"checkpoint", w.event.path},
                              {"eio_files", files},
                              {"relaunch_exit", rl.exit.describe()},
                              {"relaunch_first_step", rl.first_step}};
    note_held(held_why_not, &numbers);
    const std::string eio = "reads of " + short_name(w.event.path) + " (" + std::to_string(files.size()) +
                            " file" + (files.size() == 1 ? "" : "s") + ") answered EIO; the relaunch";
    const int64_t first = rl.first_step;
    if (first < 0) {
      if (!rl.exit.ok())
        record(FaultOutcome::kRefused, true,
               eio + " refused it: " + rl.exit.describe() + " before a step (" +
                   log_tail(rl.stderr_log, 200) + ")",
               "", std::move(numbers));
      else
        record(FaultOutcome::kRelaunchFailed, false, eio + " exited 0 without training a step", "",
               std::move(numbers));
    } else if (first == 1) {
      record(
          FaultOutcome::kFreshStart, false,
          eio + " started from scratch (first logged step 1): a job that loses its progress without a word",
          "exit non-zero when the checkpoint cannot be read, or fall back to an older whole one",
          std::move(numbers));
    } else if (first == s.n + 1) {
      record(FaultOutcome::kResumedUnreadable, false,
             eio + " resumed from step " + std::to_string(s.n) + " (first logged step " +
                 std::to_string(first) + ") from state it could not read",
             "treat a failed read as a failed load", std::move(numbers));
    } else if (older.count(first - 1)) {
      const std::string why = divergence(rl);
      if (why.empty())
        record(FaultOutcome::kFellBack, true,
               eio + " fell back to the step-" + std::to_string(first - 1) +
                   " checkpoint and matched the reference",
               "", std::move(numbers));
      else
        record(FaultOutcome::kSilentDivergence, false,
               eio + " fell back to the step-" + std::to_string(first - 1) + " checkpoint and " + why, "",
               std::move(numbers));
    } else {
      record(FaultOutcome::kRelaunchFailed, false,
             eio + " resumed at step " + std::to_string(first - 1) + " (first logged step " +
                 std::to_string(first) + "), where it announced no checkpoint",
             "", std::move(numbers));
    }
    return Status::ok();
  }
};

}  // namespace

std::string faultfs_program_beside(const std::string& ckptcheck_exe) {
  return (fs::path(ckptcheck_exe).parent_path() / "ckptcheck-faultfs").string();
}

Status check_storage_faults_usable(const std::string& program) {
  const std::string need =
      " (the storage faults mount ckptcheck-faultfs, a FUSE file system: they need /dev/fuse readable and "
      "writable by this user, /usr/bin/fusermount3 from Debian's fuse3, and ckptcheck-faultfs beside "
      "ckptcheck; "
      "in a container: --device /dev/fuse --cap-add SYS_ADMIN)";
  if (::access(program.c_str(), X_OK) != 0)
    return Status::invalid_argument("cannot run " + program + ": " + std::strerror(errno) + need);
  if (::access(faultfs::kFusermount, X_OK) != 0)
    return Status::invalid_argument(std::string("no ") + faultfs::kFusermount + ": " + std::strerror(errno) +
                                    need);
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return Status::invalid_argument(std::string("cannot open /dev/fuse: ") + std::strerror(errno) + need);
  ::close(fd);
  return Status::ok();
}

Status run_storage_fault(const std::string& fault, const StorageFaultSetup& setup) {
  Fault f{setup, fault, nullptr, ""};
  CKPT_RETURN_IF_ERROR(make_directory(setup.dir));
  CKPT_RETURN_IF_ERROR(f.start_mount());
  Status s;
  if (fault == "power-loss")
    s = f.power_loss(false);
  else if (fault == "power-loss-mid-save")
    s = f.power_loss(true);
  else if (fault == "disk-full")
    s = f.disk_full();
  else if (fault == "read-error")
    s = f.read_error();
  else
    s = Status::invalid_argument("not a storage fault: " + fault);
  const Status stopped = f.mount->stop();
  CKPT_RETURN_IF_ERROR(s);
  return stopped;
}

}  // namespace ckpt
