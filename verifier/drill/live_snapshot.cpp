#include "verifier/drill/live_snapshot.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "base/file_stamp.h"
#include "base/seconds_since.h"
#include "verifier/drill/fault_drill.h"

namespace ckpt {

namespace {

namespace fs = std::filesystem;

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

bool identity_of(const fs::path& p, FileIdentity* out) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  out->size = st.st_size;
  out->mtime_ns = nanoseconds_of(st.st_mtim);
  return true;
}

// Every regular file of `source` (itself when it is a file), relative path -> identity.
Result<std::map<fs::path, FileIdentity>> list_files(const fs::path& source) {
  std::map<fs::path, FileIdentity> files;
  std::error_code ec;
  const auto status = fs::symlink_status(source, ec);
  if (ec || !fs::exists(status))
    return Status::not_found(source.string() + ": no such checkpoint (deleted?)");
  if (fs::is_regular_file(status)) {
    FileIdentity id;
    if (!identity_of(source, &id)) return Status::not_found(source.string() + ": vanished while being read");
    files[fs::path()] = id;
    return files;
  }
  if (!fs::is_directory(status))
    return Status::invalid_argument(source.string() + ": expected a checkpoint file or directory");
  for (auto it = fs::recursive_directory_iterator(source, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    FileIdentity id;
    if (!identity_of(it->path(), &id)) continue;  // vanished between listing and stat: caught below
    files[fs::relative(it->path(), source, ec)] = id;
  }
  if (ec) return Status::io_error(source.string() + ": changed while being listed: " + ec.message());
  return files;
}

}  // namespace

Result<LiveSnapshot> snapshot_checkpoint(const std::string& source_path, const std::string& dest_dir) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path source = fs::path(source_path).lexically_normal();
  const fs::path name = source.filename().empty() ? source.parent_path().filename() : source.filename();
  const fs::path dest = fs::path(dest_dir) / name;
  CKPT_ASSIGN_OR_RETURN(const auto before, list_files(source));
  if (before.empty()) return Status::corruption(source.string() + ": the checkpoint holds no file");
  LiveSnapshot snap;
  snap.path = dest.string();
  std::error_code ec;
  for (const auto& [rel, id] : before) {
    const fs::path from = rel.empty() ? source : source / rel;
    const fs::path to = rel.empty() ? dest : dest / rel;
    fs::create_directories(to.parent_path(), ec);
    if (ec) return Status::io_error(to.parent_path().string() + ": cannot create: " + ec.message());
    fs::create_hard_link(from, to, ec);
    if (!ec) {
      ++snap.linked;
    } else {
      ec.clear();
      fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
      if (ec)
        return Status::io_error(from.string() +
                                ": vanished or unreadable while the snapshot was taken: " + ec.message());
      ++snap.copied;
    }
    ++snap.files;
    snap.bytes += static_cast<uint64_t>(id.size);
    snap.newest_mtime_ns = std::max(snap.newest_mtime_ns, id.mtime_ns);
  }
  // The same files, unchanged: otherwise the run was still writing (or already deleting) it.
  CKPT_ASSIGN_OR_RETURN(const auto after, list_files(source));
  for (const auto& [rel, id] : before) {
    auto it = after.find(rel);
    if (it == after.end() || !(it->second == id))
      return Status::io_error((rel.empty() ? source : source / rel).string() +
                              (it == after.end() ? ": vanished" : ": changed") +
                              " while the snapshot was taken");
    FileIdentity copy;
    if (!identity_of(rel.empty() ? dest : dest / rel, &copy) || copy.size != id.size)
      return Status::io_error((rel.empty() ? dest : dest / rel).string() +
                              ": the snapshot's copy differs in size");
  }
  if (after.size() != before.size())
    return Status::io_error(source.string() + ": files were added while the snapshot was taken");
  // A single file's seal and signature go with it (fault_drill.h): what the program verifies it with.
  for (const std::string& companion : checkpoint_companions(source.string())) {
    const fs::path to = fs::path(dest_dir) / fs::path(companion).filename();
    fs::create_hard_link(companion, to, ec);
    if (ec) {
      ec.clear();
      fs::copy_file(companion, to, fs::copy_options::overwrite_existing, ec);
      if (ec)
        return Status::io_error(companion + ": unreadable while the snapshot was taken: " + ec.message());
    }
  }
  snap.seconds = seconds_since(start);
  return snap;
}

}  // namespace ckpt
