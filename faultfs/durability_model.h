// The durability model: a file system over a backing directory that knows, at every moment, what
// a power loss would keep. The backing directory always holds the latest (volatile) state, as the
// page cache would show it; the model keeps what it needs to roll back, in a state directory on the
// same file system, never file data in memory (docs/faultfs.md).
//
// Strict POSIX model (the ALICE / CrashMonkey reading, leveldb's fault_injection_test.cc):
//   - a file's data and size become durable at fsync/fdatasync of that file, or sync();
//   - a directory entry (create, mkdir, link, symlink, unlink, rmdir, rename in or out) becomes
//     durable at fsync of that directory, or sync(); nothing else makes it durable (not the fsync
//     of the file, not close);
//   - reads see the latest writes.
// power_loss() resets the backing directory to the durable state: files whose entry never became
// durable vanish, data and size written since the last fsync revert, renames and unlinks whose
// directory was never fsynced are undone. A rename between two directories is two entries: each
// side becomes durable with its own directory's fsync (so a file can come back under both names).
//
// Invariant: every change to the backing directory goes through this class, so its namespace (one
// Node per file, directory or symlink, with its volatile and durable entries) mirrors the backing
// directory exactly. Each file's last durable content is (the backing file) overlaid with (the
// ranges of its shadow file in <state>/shadow/<id>, saved just before they were first changed since
// the durability point), cut to durable_size. A file that loses its last name while a durable entry
// still names it is kept alive by a hard link <state>/inodes/<id>.
//
// Thread-safe: one mutex around everything (the FUSE front is single-threaded anyway; the lock makes
// concurrent in-process writers correct, not fast).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "faultfs/byte_ranges.h"
#include "faultfs/journal.h"

namespace ckpt::faultfs {

// An errno value, 0 on success: what the FUSE front returns negated and what the tests compare.
using Errno = int;
using HandleId = uint64_t;

struct DirEntry {
  std::string name;
  mode_t mode = 0;  // S_IFMT bits of the entry
  ino_t ino = 0;
};

class DurabilityModel {
 public:
  // `backing_dir` must exist; its current content is taken as durable (the model syncfs()es it first).
  // `state_dir` is created if missing, must be on the same file system as `backing_dir` (hard links)
  // and outside it. `root_name` is how messages name the root ("ckpt" gives "no fsync of ckpt/").
  static Result<std::unique_ptr<DurabilityModel>> open(const std::string& backing_dir,
                                                       const std::string& state_dir,
                                                       const std::string& root_name = ".");
  ~DurabilityModel();
  DurabilityModel(const DurabilityModel&) = delete;
  DurabilityModel& operator=(const DurabilityModel&) = delete;

  // ---- files. Paths are relative to the root ("ckpt/a.pt"; a leading '/' is ignored).
  // open(2) flags: O_CREAT, O_EXCL, O_TRUNC, O_APPEND (the caller passes the offset), O_DIRECT
  // (ignored: it bypasses a cache, it does not make anything durable), O_SYNC/O_DSYNC (every write
  // is followed by an fdatasync). Symlinks are never followed (ELOOP).
  Errno open_file(const std::string& path, int flags, mode_t mode, HandleId* handle);
  Errno read(HandleId handle, char* buf, size_t size, uint64_t offset, size_t* done);
  // A write beyond the ENOSPC budget is cut short at the budget; one at the budget fails ENOSPC.
  Errno write(HandleId handle, const char* buf, size_t size, uint64_t offset, size_t* done);
  Errno truncate(const std::string& path, uint64_t size);
  Errno ftruncate(HandleId handle, uint64_t size);
  // Modes 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|KEEP_SIZE and FALLOC_FL_ZERO_RANGE[|KEEP_SIZE];
  // collapse, insert and unshare ranges move data the model does not track: EOPNOTSUPP.
  Errno fallocate(HandleId handle, int mode, uint64_t offset, uint64_t length);
  // copy_file_range as reads and writes through the model (counted, faulted and journalled alike).
  Errno copy_range(HandleId in, uint64_t offset_in, HandleId out, uint64_t offset_out, size_t size,
                   size_t* done);
  Errno fsync(HandleId handle, bool datasync);
  Errno release(HandleId handle);

  // ---- the namespace.
  Errno mkdir(const std::string& path, mode_t mode);
  Errno rmdir(const std::string& path);
  Errno unlink(const std::string& path);
  // flags: 0 or RENAME_NOREPLACE; RENAME_EXCHANGE and RENAME_WHITEOUT are refused with EINVAL, as a
  // file system without them answers.
  Errno rename(const std::string& from, const std::string& to, unsigned flags = 0);
  Errno link(const std::string& from, const std::string& to);
  Errno symlink(const std::string& target, const std::string& path);
  Errno readlink(const std::string& path, std::string* target);
  Errno fsync_dir(const std::string& path);
  // sync(2)/syncfs(2): everything becomes durable. (Through FUSE a program's sync() never reaches the
  // daemon; the control protocol's `sync` calls this.)
  Errno sync();

  // ---- passthrough that changes nothing the model tracks (metadata is not rolled back).
  Errno stat(const std::string& path, struct stat* st);
  Errno fstat(HandleId handle, struct stat* st);
  Errno list_dir(const std::string& path, std::vector<DirEntry>* entries);
  Errno statfs(struct statvfs* st);
  Errno chmod(const std::string& path, mode_t mode);
  Errno chown(const std::string& path, uid_t uid, gid_t gid);
  Errno utimens(const std::string& path, const struct timespec times[2]);

  // ---- faults.
  // Writes fail with ENOSPC once `bytes` more bytes have been written (counted from this call).
  void enospc_after(uint64_t bytes);
  // Reads of the file now at `path` (and of whatever is opened under that name later) fail with EIO.
  void eio_on_read(const std::string& path);
  void clear_faults();
  // The kill switch and the power loss: from now on every operation fails with EIO (open handles
  // stay dead for good), and the backing directory is reset to the durable state. Returns what was
  // lost and the call that would have kept it. Idempotent while frozen.
  Result<std::vector<Loss>> power_loss();
  // Operations work again (on what survived); handles opened before the power loss stay dead.
  void recover();
  bool frozen() const;

  std::vector<JournalEntry> journal() const;
  std::vector<Loss> last_losses() const;
  std::string journal_json() const;
  const std::string& backing_dir() const { return backing_; }

 private:
  enum class Kind { kFile, kDir, kSymlink };
  struct Node {
    Kind kind = Kind::kFile;
    std::vector<std::pair<NodeId, std::string>> names;  // volatile names: (parent dir, name)
    std::string last_path;                              // for messages once it has no name
    uint32_t durable_links = 0;                         // durable entries naming it, in any dir
    uint32_t open_handles = 0;
    bool parked = false;  // the backing inode is held at <state>/inodes/<id>
    mode_t mode = 0755;   // directories: the mode they are recreated with
    std::string symlink_target;
    // Files.
    uint64_t durable_size = 0;
    bool data_dirty = false;   // content or size changed since its durability point
    bool ever_synced = false;  // a durability point after its creation (or it predates the model)
    uint64_t bytes_since_sync = 0;
    ByteRanges saved;  // ranges of [0, durable_size) preserved in the shadow file
    int shadow_fd = -1;
    // Directories: name -> node, as the backing dir shows it and as of its last durability point.
    std::map<std::string, NodeId> entries;
    std::map<std::string, NodeId> durable_entries;
    std::vector<size_t> waiting_journal;  // journal entries waiting on this node's fsync
    size_t open_write_entry = SIZE_MAX;   // the write entry later writes add to, until another op
  };
  struct Handle {
    int fd = -1;  // -1 once dead (a power loss came)
    NodeId node = 0;
    bool sync_writes = false;
    bool readable = false;
    std::string path;
  };

  DurabilityModel(std::string backing, std::string state, std::string root_name);
  Status scan();
  Status scan_dir(NodeId dir, const std::string& rel, std::map<std::pair<dev_t, ino_t>, NodeId>* seen);
  Errno resolve(const std::string& path, NodeId* node) const;
  Errno resolve_parent(const std::string& path, NodeId* parent, std::string* name) const;
  std::string path_of(NodeId id) const;
  std::string backing_path_of(const std::string& rel) const;
  std::string node_backing_path(NodeId id) const;  // a volatile name, else its parked link
  std::string display(const std::string& rel) const;
  std::string display_dir(const std::string& rel) const;
  std::string inode_link_path(NodeId id) const;
  std::string shadow_path(NodeId id) const;
  NodeId new_node(Kind kind);
  void add_name(NodeId node, NodeId parent, const std::string& name);
  void remove_name(NodeId node, NodeId parent, const std::string& name);
  Errno park(NodeId id);
  void maybe_forget(NodeId id);
  size_t journal_add(const std::string& op, const std::string& path, const std::string& to, NodeId node,
                     const std::vector<NodeId>& waiting);
  void record_data_change(NodeId id, const std::string& op, uint64_t offset, uint64_t bytes, bool is_write);
  void mark_durable(NodeId id, uint64_t seq);
  void make_data_durable(NodeId id, uint64_t size, uint64_t seq);
  void make_entries_durable(NodeId dir, uint64_t seq);
  Errno preserve(NodeId id, int fd, bool fd_readable, uint64_t begin, uint64_t end);
  Errno live_handle(HandleId handle, Handle** out);
  Errno truncate_node(NodeId id, int fd, bool fd_readable, uint64_t size);
  Errno write_locked(Handle& h, const char* buf, size_t size, uint64_t offset, size_t* done);
  Errno read_locked(Handle& h, char* buf, size_t size, uint64_t offset, size_t* done);
  std::vector<Loss> compute_losses() const;
  bool has_name(NodeId id, const std::string& rel) const;
  bool durably_named(const std::vector<NodeId>& dirs, const std::string& rel, NodeId id) const;
  Status rollback();
  int64_t now_ns() const;

  mutable std::mutex mu_;
  const std::string backing_, state_, root_name_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unordered_map<NodeId, Node> nodes_;
  NodeId next_node_ = 1;
  NodeId root_ = 0;
  std::unordered_map<HandleId, Handle> handles_;
  HandleId next_handle_ = 1;
  std::vector<JournalEntry> journal_;
  uint64_t seq_ = 0;
  bool frozen_ = false;
  std::vector<Loss> last_losses_;
  // Faults.
  bool enospc_armed_ = false;
  uint64_t enospc_budget_ = 0;
  std::set<std::string> eio_paths_;
  std::set<NodeId> eio_nodes_;
  std::vector<char> copy_buffer_;  // one 1 MiB buffer for every copy: memory stays flat
};

}  // namespace ckpt::faultfs
