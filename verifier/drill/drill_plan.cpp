#include "verifier/drill/drill_plan.h"

#include <algorithm>
#include <numeric>

#include "verifier/drill/fault_catalogue.h"
#include "verifier/drill/program_launcher.h"

namespace ckpt {

Result<DrillPlan> plan_drill(const DrillOptions& o, int64_t default_n) {
  const bool built_in = o.command.empty();
  if (!built_in) {
    if (o.save_at < 1) return Status::invalid_argument("drill `command` needs `save_at` N (N >= 1)");
    if (!o.inject.empty())
      return Status::invalid_argument(
          "`inject` drives the built-in workload; a program of your own shows a resume bug through its own "
          "flags");
  }
  DrillPlan p;
  p.n = o.save_at < 0 ? default_n : o.save_at;
  p.k = o.resume_steps < 0 ? p.n : o.resume_steps;
  if (p.n < 1 || p.k < 1)
    return Status::invalid_argument("`save_at` and `resume_steps` must be >= 1 (got N=" +
                                    std::to_string(p.n) + ", K=" + std::to_string(p.k) + ")");
  const bool during_save = std::count(o.modes.begin(), o.modes.end(), KillMode::kDuringSave) > 0;
  const bool needs_half = o.inject == kStaleShardInject || during_save || !o.faults.empty();
  if (needs_half && o.save_every <= 0 && (p.n < 2 || p.n % 2 != 0))
    return Status::invalid_argument(
        "`save_at` must be even and >= 2 for during-save, stale-shard or `faults`, which resume from the "
        "checkpoint at N/2 (got " +
        std::to_string(p.n) + "; or give `save_every`)");
  p.save_every = o.save_every > 0 ? o.save_every : needs_half ? p.n / 2 : std::gcd(p.n, p.k);
  // An earlier checkpoint at N - save_every must exist for during-save and the stale faults.
  if (needs_half && (p.save_every < 1 || p.n < 2 * p.save_every))
    return Status::invalid_argument(
        "`save_at` must be >= 2 x the save interval for during-save, stale-shard or `faults` (got N=" +
        std::to_string(p.n) + ", save every " + std::to_string(p.save_every) + ")");
  if (p.save_every < 1 || p.n % p.save_every != 0 || (p.n + p.k) % p.save_every != 0)
    return Status::invalid_argument("the save interval " + std::to_string(p.save_every) + " must divide N=" +
                                    std::to_string(p.n) + " and N+K=" + std::to_string(p.n + p.k));
  if (!o.inject.empty() && !is_known_drill_inject(o.inject))
    return Status::invalid_argument("`inject`: unknown negative control '" + o.inject + "'");
  if (o.inject == kStaleShardInject && o.modes.size() == 1 && o.modes[0] == KillMode::kDuringSave)
    return Status::invalid_argument(
        "`inject` stale-shard needs an after-save kill (`modes` after-save|both)");
  bool copy_faults = false, storage_faults = false;
  for (const auto& f : o.faults) {
    const FaultSpec* spec = find_fault(f);
    if (!spec) return Status::invalid_argument("`faults`: unknown fault '" + f + "' (" + fault_names() + ")");
    (spec->kind == FaultKind::kStorage ? storage_faults : copy_faults) = true;
  }
  if (copy_faults && std::count(o.modes.begin(), o.modes.end(), KillMode::kAfterSave) == 0)
    return Status::invalid_argument("`faults` " + fault_names(FaultKind::kCopy) +
                                    " damage the after-save checkpoint: use `modes` after-save|both");
  if (storage_faults && o.launcher == "slurm")
    return Status::invalid_argument("`faults` " + fault_names(FaultKind::kStorage) +
                                    " mount the subject's checkpoint dir on this node: they need `launcher` "
                                    "local");
  if (o.relaunch_dir != "same" && o.relaunch_dir != "fresh")
    return Status::invalid_argument("`relaunch_dir`: expected same or fresh, got '" + o.relaunch_dir + "'");
  if (o.shards < 1) return Status::invalid_argument("`shards` must be >= 1");
  CKPT_RETURN_IF_ERROR(check_launcher_options(o));
  p.control = o.control || changes_world_size(o);
  return p;
}

}  // namespace ckpt
