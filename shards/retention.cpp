#include "shards/retention.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/file_io.h"

namespace ckpt {
namespace {

bool is_deleting_leftover(const std::string& path) {
  return base_name(path).rfind(kDeletingDirPrefix, 0) == 0;
}

// The base name of the checkpoint resolve_latest_checkpoint would pick, from the listing alone.
std::string latest_name(const CheckpointListing& listing) {
  if (step_from_dir_name(listing.latest_pointer) >= 0) {
    for (const auto& dir : listing.committed) {
      if (base_name(dir) == listing.latest_pointer) return listing.latest_pointer;
    }
  }
  return listing.committed.empty() ? "" : base_name(listing.committed.back());
}

Status remove_tree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // does not follow symlinks out of the tree
  if (ec) return Status::io_error(dir + ": cannot remove: " + ec.message());
  return Status::ok();
}

}  // namespace

RetentionPlan plan_retention(const CheckpointListing& listing, const RetentionPolicy& policy,
                             const std::string& protect) {
  RetentionPlan plan;
  for (const auto& dir : listing.uncommitted) {
    if (is_deleting_leftover(dir)) plan.leftovers.push_back(dir);
  }
  std::set<std::string> kept;  // base names
  const std::string latest = latest_name(listing);
  if (!latest.empty()) kept.insert(latest);
  if (!protect.empty()) kept.insert(base_name(protect));
  // listing.committed is in ascending step order: the last keep_last entries are the newest.
  const size_t count = listing.committed.size();
  const size_t last = policy.prunes() ? static_cast<size_t>(policy.keep_last) : count;
  for (size_t i = 0; i < count; ++i) {
    const std::string name = base_name(listing.committed[i]);
    const int64_t step = step_from_dir_name(name);
    if (count - i <= last) kept.insert(name);
    if (policy.keep_every > 0 && step % policy.keep_every == 0) kept.insert(name);
  }
  for (const auto& dir : listing.committed) {
    (kept.count(base_name(dir)) ? plan.keep : plan.remove).push_back(dir);
  }
  return plan;
}

Result<PruneResult> prune_checkpoints(const std::string& root, const RetentionPolicy& policy,
                                      const std::string& protect, const PruneHooks& hooks) {
  PruneResult result;
  if (!policy.prunes()) return result;
  const RetentionPlan plan = plan_retention(list_checkpoints(root), policy, protect);
  for (const auto& dir : plan.leftovers) {
    CKPT_RETURN_IF_ERROR(remove_tree(dir));
    result.leftovers_removed.push_back(dir);
  }
  bool first = true;
  for (const auto& dir : plan.remove) {
    // The pid keeps two runs' leftovers apart; one writer per root makes a clash impossible
    // otherwise, and the leftovers of earlier runs were removed just above.
    const std::string renamed =
        root + "/" + kDeletingDirPrefix + base_name(dir) + "-" + std::to_string(::getpid());
    if (::rename(dir.c_str(), renamed.c_str()) != 0) {
      return Status::io_error(dir + ": rename to " + renamed + " failed: " + std::strerror(errno));
    }
    // Durable before any byte of it is removed: after a crash the name is either step_* with the
    // whole tree, or .deleting-*.
    CKPT_RETURN_IF_ERROR(fsync_directory(root));
    if (first && hooks.after_first_rename) hooks.after_first_rename(renamed);
    first = false;
    CKPT_RETURN_IF_ERROR(remove_tree(renamed));
    result.removed.push_back(dir);
  }
  return result;
}

}  // namespace ckpt
