#include "verifier/drill/drill_record.h"

#include "base/progress.h"

namespace ckpt {

std::string mode_suffix(const std::string& mode) {
  if (mode.empty()) return "";
  if (mode == "live") return " (live)";
  return " (" + mode + " kill)";
}

void DrillRecord::phase(const std::string& what) {
  ++phases_done;
  if (progress) progress->update("drill: " + what, phases_done, phases_total);
}

void DrillRecord::add_check(DrillCheck check, const std::string& failure) {
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
  out.wall_seconds = wall_seconds;
  if (progress) progress->finish();
  return std::move(out);
}

}  // namespace ckpt
