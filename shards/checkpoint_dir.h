// The commit protocol of a checkpoint root:
//
//   root/.tmp-step_00000008-<pid>/   shards are written and fsynced here, then manifest.json last
//   root/step_00000008/              the temp dir renamed: the checkpoint is now committed
//   root/latest                      "step_00000008\n", replaced atomically after the rename
//
// A process killed at any moment leaves every earlier committed checkpoint intact: nothing is
// ever written inside a committed directory, a committed name is never reused, and `latest` is
// trusted only if it names a directory that holds a manifest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

constexpr const char* kLatestFileName = "latest";
constexpr const char* kTempDirPrefix = ".tmp-";
// A committed checkpoint being deleted by a prune (shards/retention.h): never a checkpoint again.
constexpr const char* kDeletingDirPrefix = ".deleting-";

std::string step_dir_name(int64_t step);  // "step_00000008"
// Parses "step_00000008" -> 8; nullopt-like -1 for any other name.
int64_t step_from_dir_name(const std::string& name);
bool is_committed_checkpoint(const std::string& dir);  // holds a regular manifest.json

// One writer per checkpoint root. An flock(2) on <root>/.writer.lock, taken before training
// starts, so a second writer is refused at once (naming the holder's pid) instead of at its first
// save. The kernel drops the lock when its holder dies, so a lock left by a killed process never
// blocks. Move-only; released by the destructor. Taking it also finishes the commit of a writer
// killed between its rename and its `latest` update: `latest` moves to the newest committed step.
class RootWriterLock {
 public:
  static Result<RootWriterLock> acquire(const std::string& root);
  RootWriterLock(RootWriterLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  RootWriterLock& operator=(RootWriterLock&&) = delete;
  RootWriterLock(const RootWriterLock&) = delete;
  ~RootWriterLock();

 private:
  explicit RootWriterLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};
constexpr const char* kWriterLockFileName = ".writer.lock";

// A checkpoint being written. A save that fails calls abandon(), which removes the temp dir so a
// disk that ran out keeps no half-written shards; destroying it without either (the writer was
// killed) leaves the temp dir behind, which `verify --all` reports as uncommitted: it is never
// mistaken for a checkpoint.
class CheckpointTransaction {
 public:
  static Result<CheckpointTransaction> begin(const std::string& root, int64_t step);
  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& final_dir() const { return final_dir_; }
  // Writes the manifest into the temp dir (fsync), fsyncs the dir, renames it to step_XXXXXXXX,
  // fsyncs the root and moves `latest` forward. Refuses if the final name already exists.
  Status commit(const std::string& manifest_text);
  // Removes the temp dir and everything in it. Never touches a committed checkpoint.
  Status abandon();

 private:
  std::string root_;
  std::string temp_dir_;
  std::string final_dir_;
  int64_t step_ = 0;
};

struct CheckpointListing {
  std::vector<std::string> committed;    // full paths, ascending step
  std::vector<std::string> uncommitted;  // temp dirs, step dirs without a manifest, .deleting-* dirs
  std::string latest_pointer;            // what `latest` says, "" if absent or unreadable
};

CheckpointListing list_checkpoints(const std::string& root);

// The checkpoint to resume from: `latest` if it names a committed checkpoint, else the committed
// checkpoint with the highest step. kNotFound if there is none.
Result<std::string> resolve_latest_checkpoint(const std::string& root);
// Accepts a checkpoint dir itself, a root (-> latest), or "latest" relative to a root.
Result<std::string> resolve_checkpoint_path(const std::string& path);

}  // namespace ckpt
