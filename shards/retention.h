// Retention of a checkpoint root (`train --keep-last N [--keep-every M]`): which committed
// checkpoints stay, and a deletion that a SIGKILL at any instant cannot turn into damage.
//
// Deletion protocol, one checkpoint at a time:
//   root/step_00000004/                  renamed (atomic) to
//   root/.deleting-step_00000004-<pid>/  then the root is fsynced, then the tree is removed
// Killed before the rename, the checkpoint is intact; killed after it, its old name is gone and
// the `.deleting-*` dir is not a checkpoint (list_checkpoints reports it as an uncommitted
// leftover, `verify --all` as a warning); the next prune removes it. A half-removed tree is thus
// never visible under a step_* name.
//
// Invariant (kept by the caller, verifier/train): a prune runs only after the new checkpoint is
// committed (manifest fsynced, renamed, root fsynced), `latest` names it, and it passed a full
// verify; the checkpoint `latest` resolves to is never deleted, whatever the policy says.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "shards/checkpoint_dir.h"

namespace ckpt {

struct RetentionPolicy {
  int64_t keep_last = 0;   // keep the N committed checkpoints with the highest steps; 0 = keep all
  int64_t keep_every = 0;  // also keep every checkpoint whose step is a multiple of M; 0 = none
  bool prunes() const { return keep_last > 0; }
};

struct RetentionPlan {
  std::vector<std::string> keep;       // committed checkpoints that stay, ascending step
  std::vector<std::string> remove;     // committed checkpoints to delete, ascending step
  std::vector<std::string> leftovers;  // `.deleting-*` dirs of an interrupted prune, to finish
};

// Pure: decided from the listing alone. Always kept, besides what the policy keeps: the checkpoint
// `latest` resolves to (the one it names if committed, else the highest step, as
// resolve_latest_checkpoint does) and `protect` (a checkpoint dir path or its base name; "" = none),
// which is how the just-committed checkpoint of a run resumed from an older one survives.
// A policy that prunes nothing (keep_last 0) keeps every committed checkpoint.
RetentionPlan plan_retention(const CheckpointListing& listing, const RetentionPolicy& policy,
                             const std::string& protect = "");

struct PruneHooks {
  // Called once, after the first checkpoint is renamed to `.deleting-*` and the root fsynced and
  // before its tree is removed: the drill's "during-prune" hold point.
  std::function<void(const std::string& renamed_dir)> after_first_rename;
};

struct PruneResult {
  std::vector<std::string> removed;            // checkpoint dirs deleted (their step_* paths)
  std::vector<std::string> leftovers_removed;  // `.deleting-*` dirs of earlier prunes
};

// Lists `root` now, plans with plan_retention and deletes by the protocol above. Stops at the
// first failure (I/O Status naming the path); what was deleted before it stays deleted.
Result<PruneResult> prune_checkpoints(const std::string& root, const RetentionPolicy& policy,
                                      const std::string& protect = "", const PruneHooks& hooks = {});

}  // namespace ckpt
