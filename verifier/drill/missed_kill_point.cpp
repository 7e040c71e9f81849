#include "verifier/drill/missed_kill_point.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "verifier/process/child_process.h"
#include "verifier/tensors/state_compare.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

// The names in the run's checkpoint dir, sorted; at most `max` of them and "..." after.
std::string names_in(const std::string& dir, size_t max = 6) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  std::string text;
  for (size_t i = 0; i < names.size() && i < max; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > max) text += ", ... (" + std::to_string(names.size()) + " in all)";
  return text;
}

std::string stderr_part(const std::string& stderr_log) {
  const std::string tail = log_tail(stderr_log);
  return tail.empty() ? " (its stderr is empty)" : "; its stderr ends: " + tail;
}

}  // namespace

std::string explain_missed_kill_point(const MissedKillPoint& r) {
  const std::string who =
      "subject (" + r.mode + ") never reached its kill point at step " + std::to_string(r.save_at);
  const std::string n = std::to_string(r.save_at);
  auto log = read_metrics_log(r.metrics, r.ckpt_dir);
  if (!r.bad_metrics.empty()) return who + ": its metrics log breaks the contract: " + r.bad_metrics;
  if (!log.is_ok() && log.status().code() == StatusCode::kCorruption)
    return who + ": its metrics log breaks the contract: " + log.status().message();
  const MetricsLog empty;
  const MetricsLog& m = log.is_ok() ? *log : empty;
  const int64_t last = m.steps.empty() ? -1 : m.steps.back().step;
  const std::string at = last < 0 ? "before logging any step" : "at step " + std::to_string(last);
  if (r.exit.timed_out)
    return who + ": it was still running " + at + " after " + format_number(r.timeout_seconds) +
           " s (--child-timeout)" + stderr_part(r.stderr_log);
  if (r.exit.exited && r.exit.exit_code == 127)
    return who + ": exit 127, a command was not found (the code a shell and a failed exec give)" +
           stderr_part(r.stderr_log);
  if (!r.exit.ok()) return who + ": it failed (" + r.exit.describe() + ") " + at + stderr_part(r.stderr_log);
  // It exited 0 without the awaited moment.
  if (last < 0)
    return who + ": it exited 0 without logging a step to CKPTCHECK_METRICS (" + r.metrics +
           "): log {\"step\": int, \"loss\": number} after every optimizer step";
  if (last < r.save_at)
    return who + ": it exited 0 after its last step, " + std::to_string(last) + ", before step " + n +
           " (it was told CKPTCHECK_STEPS=" + std::to_string(r.steps) +
           "): give --save-at a step the program reaches, or have it train to CKPTCHECK_STEPS";
  const std::string files = names_in(r.ckpt_dir);
  if (m.checkpoints.empty()) {
    if (files.empty())
      return who + ": it trained to step " + std::to_string(last) +
             " but saved nothing in CKPTCHECK_CKPT_DIR (" + r.ckpt_dir +
             "): save after every step that is a multiple of CKPTCHECK_SAVE_EVERY (" +
             std::to_string(r.save_every) + "), then log {\"event\": \"checkpoint\", \"step\": " + n +
             ", \"path\": ...}";
    return who + ": it trained to step " + std::to_string(last) +
           " but logged no checkpoint event; its checkpoint dir holds " + files +
           ", never announced: after each save returns, log {\"event\": \"checkpoint\", \"step\": " + n +
           ", \"path\": \"<file or dir>\"} to CKPTCHECK_METRICS";
  }
  std::string announced;
  bool outside = false;
  for (const auto& e : m.checkpoints) {
    announced += (announced.empty() ? "" : ", ") + std::to_string(e.step);
    const std::string rel = fs::path(e.path).lexically_normal().lexically_relative(fs::path(r.ckpt_dir));
    outside = outside || rel.empty() || rel.rfind("..", 0) == 0;
  }
  if (r.mode == "during-save" && outside)
    return who + ": its checkpoints are announced outside CKPTCHECK_CKPT_DIR (" + m.checkpoints.back().path +
           "), and the during-save kill watches that dir (" + r.ckpt_dir + ") for the step-" + n +
           " save to begin: save into it";
  if (r.mode == "during-save")
    return who + ": nothing was created or written in its checkpoint dir (" + r.ckpt_dir +
           ") once it trained past step " + std::to_string(r.save_at - r.save_every) +
           " (it announced steps " + announced + "): the during-save kill waits for the step-" + n +
           " save to create or write its first file there";
  return who + ": it announced checkpoints of steps " + announced + " but none of step " + n +
         ": save after every step that is a multiple of CKPTCHECK_SAVE_EVERY (" +
         std::to_string(r.save_every) + ")";
}

}  // namespace ckpt
