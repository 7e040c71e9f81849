#include "verifier/drill/checkpoint_checks.h"

#include <chrono>
#include <filesystem>
#include <set>

#include "base/json_fields.h"
#include "base/seconds_since.h"
#include "formats/native_shard.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/process/child_process.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

namespace {

namespace fs = std::filesystem;

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

// "verify failed on step_00000004: shard shard-00000-of-00002.cks (holds model, optimizer
// tensors): <first error>" — names what a user has to look at.
std::string verify_failure(const std::string& checkpoint, const nlohmann::json& j, const ChildExit& e) {
  std::string m = "verify failed on " + fs::path(checkpoint).filename().string();
  const auto& errors = j.contains("errors") && j["errors"].is_array() ? j["errors"] : nlohmann::json::array();
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
    const size_t before = components.size();
    for (size_t i = 0; manifest.is_ok() && i < manifest->shards.size(); ++i) {
      if (fs::path(manifest->shards[i].path).filename() != shard) continue;
      for (const auto& t : manifest->tensors)
        for (const auto& c : t.chunks)
          if (c.shard == i) components.insert(t.component);
    }
    // A version-2 manifest's records of a shard are its header's, which a reader refuses when it is
    // not the committed one (a stale shard): the shard's own header still says what it holds.
    if (components.size() == before) {
      auto file = open_native_shard_file(checkpoint + "/" + shard);
      if (file.is_ok())
        for (const ChunkInfo& c : (*file)->chunks()) components.insert(c.component);
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

}  // namespace

Result<bool> verify_in_child(DrillRecord& record, const std::string& exe, const std::string& checkpoint,
                             const std::string& log_dir, const std::string& mode, double timeout_seconds,
                             double* seconds) {
  const std::string name = fs::path(checkpoint).filename().string();
  CKPT_ASSIGN_OR_RETURN(
      ChildProcess child,
      ChildProcess::spawn({exe, "verify", checkpoint, "--json"}, log_dir + "/verify-" + name + ".json",
                          log_dir + "/verify-" + name + ".stderr.log", true));
  const auto start = std::chrono::steady_clock::now();
  const ChildExit e = child.wait(timeout_seconds);
  const double wall = seconds_since(start);
  if (e.timed_out) return Status::io_error("verify " + checkpoint + ": " + e.describe());
  const nlohmann::json j = parse_verify_output(child.captured_stdout());
  if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean())
    return Status::io_error("verify " + checkpoint + " gave no JSON result (" + e.describe() +
                            "): " + log_tail(child.stderr_log()));
  *seconds += j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>() : wall;
  const bool ok = j["ok"].get<bool>() && e.exited && e.exit_code == 0;
  DrillCheck c{"verify", mode, ok, "", {}};
  c.numbers = {{"checkpoint", checkpoint}, {"exit", e.describe()}, {"wall_seconds", wall}, {"result", j}};
  c.detail = ok ? name + " verified" : verify_failure(checkpoint, j, e);
  record.add_check(c, c.detail);
  return ok;
}

bool check_readable(DrillRecord& record, const std::string& checkpoint, const std::string& mode) {
  auto snap = read_state_snapshot(checkpoint);
  DrillCheck c{"checkpoint_readable", mode, snap.is_ok(), "", {{"checkpoint", checkpoint}}};
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
  record.add_check(c, c.detail);
  return snap.is_ok();
}

void check_resume_state(DrillRecord& record, const std::string& checkpoint, const std::string& mode) {
  static const char* const kMissing[] = {
      verify_code::kOptimizerStateMissing, verify_code::kSchedulerStateMissing,
      verify_code::kStepStateMissing,      verify_code::kScalerStateMissing,
      verify_code::kRngStateMissing,       verify_code::kDataStateMissing};
  VerifyOptions options;
  options.jobs = 1;
  auto report = verify_path(checkpoint, options);
  if (!report.is_ok()) return;  // nothing verify can judge: check_readable has said what it could read
  nlohmann::json missing = nlohmann::json::array();
  std::string detail;
  for (const VerifyIssue& e : report->errors)
    for (const char* code : kMissing)
      if (e.code == code) {
        missing.push_back({{"code", e.code}, {"message", e.message}});
        detail += (detail.empty() ? "" : "; ") + e.code + ": " + e.message;
      }
  nlohmann::json found = nlohmann::json::array();
  for (const ResumeStateFound& f : report->resume_state)
    found.push_back({{"part", f.part}, {"where", f.where}});
  DrillCheck c{"resume_state",
               mode,
               missing.empty(),
               "",
               {{"checkpoint", checkpoint}, {"missing", missing}, {"found", found}}};
  c.skipped = !missing.empty();  // a warning: the comparison judges whether the resume lost anything
  if (missing.empty()) {
    std::string parts;
    for (const auto& f : report->resume_state) parts += (parts.empty() ? "" : ", ") + f.part;
    c.detail = fs::path(checkpoint).filename().string() + " holds " +
               (parts.empty() ? "no resume state verify recognises" : parts);
  } else {
    c.detail = "verify " + fs::path(checkpoint).filename().string() + ": " + detail;
  }
  record.add_check(c);
}

}  // namespace ckpt
