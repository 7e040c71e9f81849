#include "verifier/drill/drill_record.h"

#include "base/progress.h"

namespace ckpt {

std::string mode_suffix(const std::string& mode) {
  if (mode.empty()) return "";
  if (mode == "live") return " (live)";
  return " (" + mode + " kill)";
}

std::string resumed_from_words(const std::string& checkpoint_name, int64_t step, int64_t first_logged) {
  if (first_logged == 1 && step >= 1)
    return "started from scratch: first logged step 1, expected " + std::to_string(step + 1) +
           " (the relaunch was given CKPTCHECK_RESUME=" + checkpoint_name + ", step " + std::to_string(step) +
           ", and did not resume from it)";
  return "resumed from " + checkpoint_name + " (step " + std::to_string(step) + "); first logged step " +
         std::to_string(first_logged) + ", expected " + std::to_string(step + 1);
}

std::string drill_headline(const DrillOutcome& out) {
  if (out.exit_code != 1) return "";
  auto first_of = [&](const char* name, auto&& pick) -> std::string {
    for (const auto& c : out.checks) {
      if (c.name != name) continue;
      std::string found = pick(c);
      if (!found.empty()) return found + mode_suffix(c.mode);
    }
    return "";
  };
  std::string h = first_of("resumed_from", [](const DrillCheck& c) -> std::string {
    return !c.passed && c.detail.rfind("started from scratch", 0) == 0 ? c.detail : "";
  });
  // Missing state is the cause when it failed the drill, or when the restore itself failed (a check
  // other than a fault's); where only faults failed, a warning that failed nothing is no cause.
  bool restore_failed = false;
  for (const auto& c : out.checks)
    restore_failed = restore_failed || (!c.passed && !c.skipped && c.name.rfind("fault_", 0) != 0);
  if (h.empty())
    h = first_of("resume_state", [&](const DrillCheck& c) -> std::string {
      if ((c.passed || c.skipped) && !restore_failed) return "";
      const auto& missing = c.numbers.value("missing", nlohmann::json::array());
      if (!missing.is_array() || missing.empty() || !missing[0].is_object()) return "";
      return "the checkpoint resumed from lacks state (verify: " + missing[0].value("code", std::string()) +
             "): " + missing[0].value("message", std::string());
    });
  if (h.empty())
    h = first_of("final_state", [](const DrillCheck& c) -> std::string {
      const auto& nr = c.numbers.value("not_restored", nlohmann::json::array());
      return nr.is_array() && !nr.empty() && nr[0].is_object() ? nr[0].value("words", std::string()) : "";
    });
  if (h.empty() && !restore_failed) {
    // Only faults failed: the first one, in its own words.
    for (const auto& c : out.checks) {
      if (!c.passed && !c.skipped && c.name.rfind("fault_", 0) == 0)
        return c.name.substr(6) + ": " + c.detail;
    }
  }
  return h;
}

DrillCheck fault_not_applicable(const std::string& fault, const std::string& why) {
  DrillCheck c{"fault_" + fault, "", false, "not applicable: " + why, {}};
  c.skipped = true;
  return c;
}

void DrillRecord::phase(const std::string& what) {
  ++phases_done;
  if (progress) progress->update("drill: " + what, phases_done, phases_total);
}

void DrillRecord::stamp(DrillCheck& check) {
  const auto now = std::chrono::steady_clock::now();
  if (check.seconds < 0) check.seconds = std::chrono::duration<double>(now - last_check).count();
  last_check = now;
}

void DrillRecord::add_check(DrillCheck check, const std::string& failure) {
  stamp(check);
  if (!check.passed && !check.skipped)
    fail(failure.empty() ? check.name + ": " + check.detail : failure, check.mode);
  out.checks.push_back(std::move(check));
}

void DrillRecord::fail(const std::string& message, const std::string& mode) {
  out.failures.push_back(message + mode_suffix(mode));
}

DrillOutcome DrillRecord::finish(const Status& status, double wall_seconds, bool identical) {
  out.exit_code = !status.is_ok() ? 2 : out.failures.empty() ? 0 : 1;
  if (!status.is_ok()) out.error = status.message();
  out.bit_identical = out.exit_code == 0 && identical;
  out.headline = drill_headline(out);
  out.wall_seconds = wall_seconds;
  if (progress) progress->finish();
  return std::move(out);
}

}  // namespace ckpt
