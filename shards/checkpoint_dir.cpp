#include "shards/checkpoint_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/file_io.h"
#include "shards/manifest.h"

namespace ckpt {

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

int64_t step_from_dir_name(const std::string& name) {
  if (name.size() < 13 || name.compare(0, 5, "step_") != 0 || name.size() > 24) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

bool is_committed_checkpoint(const std::string& dir) {
  return is_regular_file(dir + "/" + kManifestFileName);
}

Result<CheckpointTransaction> CheckpointTransaction::begin(const std::string& root, int64_t step) {
  CKPT_RETURN_IF_ERROR(make_directory(root));
  CheckpointTransaction tx;
  tx.root_ = root;
  tx.step_ = step;
  tx.final_dir_ = root + "/" + step_dir_name(step);
  if (path_exists(tx.final_dir_)) {
    return Status::invalid_argument(tx.final_dir_ + ": already exists; refusing to overwrite a checkpoint");
  }
  tx.temp_dir_ = root + "/" + kTempDirPrefix + step_dir_name(step) + "-" + std::to_string(::getpid());
  if (path_exists(tx.temp_dir_)) {
    // Left by a killed writer whose pid was reused: move it aside rather than write into it.
    const std::string aside = tx.temp_dir_ + "-stale-" + std::to_string(::time(nullptr));
    if (::rename(tx.temp_dir_.c_str(), aside.c_str()) != 0) {
      return Status::io_error(tx.temp_dir_ + ": cannot move stale temp dir aside: " + std::strerror(errno));
    }
  }
  CKPT_RETURN_IF_ERROR(make_directory(tx.temp_dir_));
  return tx;
}

Status CheckpointTransaction::commit(const std::string& manifest_text) {
  const std::string manifest_path = temp_dir_ + "/" + kManifestFileName;
  CKPT_ASSIGN_OR_RETURN(auto file, DurableFile::create_exclusive(manifest_path));
  CKPT_RETURN_IF_ERROR(file.write(manifest_text.data(), manifest_text.size()));
  CKPT_RETURN_IF_ERROR(file.finish());
  CKPT_RETURN_IF_ERROR(fsync_directory(temp_dir_));
  if (path_exists(final_dir_)) {
    return Status::invalid_argument(final_dir_ + ": appeared while saving; refusing to overwrite it");
  }
  if (::rename(temp_dir_.c_str(), final_dir_.c_str()) != 0) {
    return Status::io_error(temp_dir_ + ": rename to " + final_dir_ + " failed: " + std::strerror(errno));
  }
  CKPT_RETURN_IF_ERROR(fsync_directory(root_));
  // `latest` only moves forward: a re-save of an older step never hides a newer checkpoint.
  auto current = resolve_latest_checkpoint(root_);
  if (current.is_ok()) {
    const auto slash = current->find_last_of('/');
    if (step_from_dir_name(current->substr(slash + 1)) > step_) return Status::ok();
  }
  return write_file_atomically(root_ + "/" + kLatestFileName, step_dir_name(step_) + "\n");
}

namespace {

// A writer killed after its rename (the commit) but before its `latest` update leaves a committed
// checkpoint newer than the one `latest` names. `train --resume latest` would then redo those steps
// and refuse to overwrite the newer checkpoint at its next save, on every restart. The next writer
// finishes that commit instead: `latest` only ever moves forward, so this is the pointer update the
// killed writer did not get to make.
Status roll_latest_forward(const std::string& root) {
  const CheckpointListing listing = list_checkpoints(root);
  if (listing.committed.empty()) return Status::ok();
  const std::string& newest = listing.committed.back();
  const std::string name = newest.substr(newest.find_last_of('/') + 1);
  if (step_from_dir_name(listing.latest_pointer) >= step_from_dir_name(name)) return Status::ok();
  return write_file_atomically(root + "/" + kLatestFileName, name + "\n");
}

}  // namespace

Result<RootWriterLock> RootWriterLock::acquire(const std::string& root) {
  CKPT_RETURN_IF_ERROR(make_directory(root));
  const std::string path = root + "/" + kWriterLockFileName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(path + ": open: " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return Status::io_error(path + ": flock: " + std::strerror(err));
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Status::invalid_argument(root + ": another writer holds this checkpoint root (pid " + holder +
                                    ", lock " + path + "); one writer per root");
  }
  const std::string mine = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::io_error(path + ": cannot record the holder's pid: " + why);
  }
  RootWriterLock lock(fd);
  CKPT_RETURN_IF_ERROR(roll_latest_forward(root));
  return lock;
}

RootWriterLock::~RootWriterLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

Status CheckpointTransaction::abandon() {
  std::error_code ec;
  std::filesystem::remove_all(temp_dir_, ec);  // does not follow symlinks out of the dir
  if (ec) return Status::io_error(temp_dir_ + ": cannot remove: " + ec.message());
  return Status::ok();
}

CheckpointListing list_checkpoints(const std::string& root) {
  CheckpointListing listing;
  std::vector<std::pair<int64_t, std::string>> committed;
  if (DIR* dir = ::opendir(root.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      const std::string full = root + "/" + name;
      const bool leftover = name.rfind(kTempDirPrefix, 0) == 0 || name.rfind(kDeletingDirPrefix, 0) == 0;
      if (leftover && is_directory(full)) {
        listing.uncommitted.push_back(full);
        continue;
      }
      const int64_t step = step_from_dir_name(name);
      if (step < 0 || !is_directory(full)) continue;
      if (is_committed_checkpoint(full)) {
        committed.emplace_back(step, full);
      } else {
        listing.uncommitted.push_back(full);
      }
    }
    ::closedir(dir);
  }
  std::sort(committed.begin(), committed.end());
  for (auto& c : committed) listing.committed.push_back(c.second);
  std::sort(listing.uncommitted.begin(), listing.uncommitted.end());
  auto pointer = read_small_file(root + "/" + kLatestFileName, 256);
  if (pointer.is_ok()) {
    std::string name = *pointer;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    listing.latest_pointer = name;
  }
  return listing;
}

Result<std::string> resolve_latest_checkpoint(const std::string& root) {
  const CheckpointListing listing = list_checkpoints(root);
  if (step_from_dir_name(listing.latest_pointer) >= 0) {
    const std::string named = root + "/" + listing.latest_pointer;
    if (is_committed_checkpoint(named)) return named;
  }
  if (listing.committed.empty()) {
    return Status::not_found(root + ": no committed checkpoint (no step_* directory with a manifest)");
  }
  return listing.committed.back();
}

Result<std::string> resolve_checkpoint_path(const std::string& path) {
  if (is_directory(path) && path_exists(path + "/" + kManifestFileName)) return path;
  const auto slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base == kLatestFileName) {
    return resolve_latest_checkpoint(slash == std::string::npos ? "." : path.substr(0, slash));
  }
  if (!path_exists(path)) return Status::io_error(path + ": no such file or directory");
  if (!is_directory(path)) return Status::io_error(path + ": not a checkpoint directory");
  if (step_from_dir_name(base) >= 0) {
    return Status::corruption(path + ": has no manifest.json: the checkpoint was never committed");
  }
  return resolve_latest_checkpoint(path);
}

}  // namespace ckpt
