#include "faultfs/durability_model.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "base/byte_units.h"
#include "base/file_io.h"

namespace ckpt::faultfs {

namespace {

constexpr size_t kCopyBufferBytes = 1 << 20;

std::string errno_text(int err) {
  return std::strerror(err);
}

// "/a//b/" -> {"a", "b"}; false for "." or ".." components (FUSE never sends them).
bool split_path(const std::string& path, std::vector<std::string>* parts) {
  parts->clear();
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) {
      std::string part = path.substr(i, j - i);
      if (part == "." || part == "..") return false;
      parts->push_back(std::move(part));
    }
    i = j;
  }
  return true;
}

std::string join_rel(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

Errno pread_full(int fd, char* buf, size_t size, uint64_t offset, size_t* done) {
  *done = 0;
  while (*done < size) {
    ssize_t n = ::pread(fd, buf + *done, size - *done, static_cast<off_t>(offset + *done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    *done += static_cast<size_t>(n);
  }
  return 0;
}

Errno pwrite_full(int fd, const char* buf, size_t size, uint64_t offset, size_t* done) {
  *done = 0;
  while (*done < size) {
    ssize_t n = ::pwrite(fd, buf + *done, size - *done, static_cast<off_t>(offset + *done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    *done += static_cast<size_t>(n);
  }
  return 0;
}

// Copies [begin, end) of `from` to the same offsets of `to` through `buffer`.
Errno copy_bytes(int from, int to, uint64_t begin, uint64_t end, std::vector<char>* buffer) {
  if (buffer->size() < kCopyBufferBytes) buffer->resize(kCopyBufferBytes);
  for (uint64_t at = begin; at < end;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(end - at, buffer->size()));
    size_t got = 0, put = 0;
    if (Errno e = pread_full(from, buffer->data(), want, at, &got)) return e;
    if (got == 0) break;  // past the end of `from`: nothing more to keep
    if (Errno e = pwrite_full(to, buffer->data(), got, at, &put)) return e;
    at += got;
  }
  return 0;
}

bool is_data_op(const std::string& op) {
  return op == "write" || op == "truncate" || op == "fallocate";
}

}  // namespace

DurabilityModel::DurabilityModel(std::string backing, std::string state, std::string root_name)
    : backing_(std::move(backing)), state_(std::move(state)), root_name_(std::move(root_name)) {}

DurabilityModel::~DurabilityModel() {
  for (auto& [id, h] : handles_)
    if (h.fd >= 0) ::close(h.fd);
  for (auto& [id, n] : nodes_)
    if (n.shadow_fd >= 0) ::close(n.shadow_fd);
}

Result<std::unique_ptr<DurabilityModel>> DurabilityModel::open(const std::string& backing_dir,
                                                               const std::string& state_dir,
                                                               const std::string& root_name) {
  std::error_code ec;
  std::string backing = std::filesystem::canonical(backing_dir, ec).string();
  if (ec || !is_directory(backing))
    return Status::invalid_argument("faultfs backing directory " + backing_dir + ": not a directory");
  CKPT_RETURN_IF_ERROR(make_directory(state_dir));
  std::string state = std::filesystem::canonical(state_dir, ec).string();
  if (ec) return Status::io_error("faultfs state directory " + state_dir + ": " + ec.message());
  if (state == backing || state.rfind(backing + "/", 0) == 0)
    return Status::invalid_argument("faultfs state directory " + state + " is inside the backing directory " +
                                    backing + ": it must be outside the file system it records");
  struct stat bs {
  }, ss{};
  if (::stat(backing.c_str(), &bs) != 0 || ::stat(state.c_str(), &ss) != 0)
    return Status::io_error("faultfs: cannot stat " + backing + " or " + state + ": " + errno_text(errno));
  if (bs.st_dev != ss.st_dev)
    return Status::invalid_argument("faultfs state directory " + state + " is on another file system than " +
                                    backing + ": it keeps hard links to files a power loss must bring back");
  // Leftovers of an earlier daemon describe a namespace that no longer exists.
  for (const char* sub : {"shadow", "inodes"}) {
    std::filesystem::remove_all(state + "/" + sub, ec);
    if (::mkdir((state + "/" + sub).c_str(), 0700) != 0)
      return Status::io_error("faultfs: mkdir " + state + "/" + sub + ": " + errno_text(errno));
  }
  std::unique_ptr<DurabilityModel> model(new DurabilityModel(backing, state, root_name));
  CKPT_RETURN_IF_ERROR(model->scan());
  return model;
}

// ---- the namespace mirror -----------------------------------------------------------------------

Status DurabilityModel::scan() {
  // What is in the backing directory now is the durable starting point: make it so on the host too.
  int fd = ::open(backing_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::io_error("faultfs: open " + backing_ + ": " + errno_text(errno));
  ::syncfs(fd);
  ::close(fd);
  for (auto& [id, n] : nodes_)
    if (n.shadow_fd >= 0) ::close(n.shadow_fd);
  nodes_.clear();
  root_ = new_node(Kind::kDir);
  nodes_[root_].ever_synced = true;
  std::map<std::pair<dev_t, ino_t>, NodeId> seen;
  return scan_dir(root_, "", &seen);
}

Status DurabilityModel::scan_dir(NodeId dir, const std::string& rel,
                                 std::map<std::pair<dev_t, ino_t>, NodeId>* seen) {
  std::string full = backing_path_of(rel);
  DIR* d = ::opendir(full.c_str());
  if (!d) return Status::io_error("faultfs: opendir " + full + ": " + errno_text(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string child_rel = join_rel(rel, name);
    struct stat st {};
    if (::lstat(backing_path_of(child_rel).c_str(), &st) != 0)
      return Status::io_error("faultfs: lstat " + backing_path_of(child_rel) + ": " + errno_text(errno));
    NodeId id = 0;
    if (S_ISDIR(st.st_mode)) {
      id = new_node(Kind::kDir);
      nodes_[id].mode = st.st_mode & 07777;
    } else if (S_ISLNK(st.st_mode)) {
      id = new_node(Kind::kSymlink);
      std::string target(4096, '\0');
      ssize_t n = ::readlink(backing_path_of(child_rel).c_str(), target.data(), target.size());
      if (n < 0) return Status::io_error("faultfs: readlink " + child_rel + ": " + errno_text(errno));
      target.resize(static_cast<size_t>(n));
      nodes_[id].symlink_target = target;
    } else if (S_ISREG(st.st_mode)) {
      auto key = std::make_pair(st.st_dev, st.st_ino);
      auto it = seen->find(key);
      if (it != seen->end()) {
        id = it->second;
      } else {
        id = new_node(Kind::kFile);
        nodes_[id].durable_size = static_cast<uint64_t>(st.st_size);
        (*seen)[key] = id;
      }
    } else {
      return Status::not_supported("faultfs: " + backing_path_of(child_rel) +
                                   " is neither a file, a directory nor a symlink: the model cannot bring "
                                   "it back after a power loss");
    }
    nodes_[id].ever_synced = true;
    add_name(id, dir, name);
    nodes_[dir].durable_entries[name] = id;
    nodes_[id].durable_links++;
    if (S_ISDIR(st.st_mode)) CKPT_RETURN_IF_ERROR(scan_dir(id, child_rel, seen));
  }
  return Status::ok();
}

Errno DurabilityModel::resolve(const std::string& path, NodeId* node) const {
  std::vector<std::string> parts;
  if (!split_path(path, &parts)) return EINVAL;
  NodeId at = root_;
  for (const std::string& part : parts) {
    const Node& n = nodes_.at(at);
    if (n.kind != Kind::kDir) return ENOTDIR;
    auto it = n.entries.find(part);
    if (it == n.entries.end()) return ENOENT;
    at = it->second;
  }
  *node = at;
  return 0;
}

Errno DurabilityModel::resolve_parent(const std::string& path, NodeId* parent, std::string* name) const {
  std::vector<std::string> parts;
  if (!split_path(path, &parts)) return EINVAL;
  if (parts.empty()) return EBUSY;  // the root itself
  *name = parts.back();
  parts.pop_back();
  NodeId at = root_;
  for (const std::string& part : parts) {
    const Node& n = nodes_.at(at);
    if (n.kind != Kind::kDir) return ENOTDIR;
    auto it = n.entries.find(part);
    if (it == n.entries.end()) return ENOENT;
    at = it->second;
  }
  if (nodes_.at(at).kind != Kind::kDir) return ENOTDIR;
  *parent = at;
  return 0;
}

std::string DurabilityModel::path_of(NodeId id) const {
  if (id == root_) return "";
  const Node& n = nodes_.at(id);
  if (n.names.empty()) return n.last_path;
  return join_rel(path_of(n.names.front().first), n.names.front().second);
}

std::string DurabilityModel::backing_path_of(const std::string& rel) const {
  return rel.empty() ? backing_ : backing_ + "/" + rel;
}

std::string DurabilityModel::node_backing_path(NodeId id) const {
  const Node& n = nodes_.at(id);
  if (n.names.empty() && n.parked) return inode_link_path(id);
  return backing_path_of(path_of(id));
}

std::string DurabilityModel::display(const std::string& rel) const {
  if (root_name_ == ".") return rel.empty() ? "./" : rel;
  return rel.empty() ? root_name_ : root_name_ + "/" + rel;
}

std::string DurabilityModel::display_dir(const std::string& rel) const {
  if (rel.empty()) return root_name_ == "." ? "./" : root_name_ + "/";
  return display(rel) + "/";
}

std::string DurabilityModel::inode_link_path(NodeId id) const {
  return state_ + "/inodes/" + std::to_string(id);
}

std::string DurabilityModel::shadow_path(NodeId id) const {
  return state_ + "/shadow/" + std::to_string(id);
}

NodeId DurabilityModel::new_node(Kind kind) {
  NodeId id = next_node_++;
  nodes_[id].kind = kind;
  return id;
}

void DurabilityModel::add_name(NodeId node, NodeId parent, const std::string& name) {
  nodes_[parent].entries[name] = node;
  nodes_[node].names.emplace_back(parent, name);
  nodes_[node].open_write_entry = SIZE_MAX;  // later writes are journalled under the new name
}

void DurabilityModel::remove_name(NodeId node, NodeId parent, const std::string& name) {
  Node& n = nodes_[node];
  n.open_write_entry = SIZE_MAX;
  if (n.names.size() == 1) n.last_path = path_of(node);
  nodes_[parent].entries.erase(name);
  auto it = std::find(n.names.begin(), n.names.end(), std::make_pair(parent, name));
  if (it != n.names.end()) n.names.erase(it);
}

// A file about to lose its last name while a durable entry still names it: a power loss must be able
// to bring it back, so keep its inode alive under the state directory.
Errno DurabilityModel::park(NodeId id) {
  Node& n = nodes_[id];
  if (n.kind != Kind::kFile || n.parked || n.names.size() != 1 || n.durable_links == 0) return 0;
  if (::link(node_backing_path(id).c_str(), inode_link_path(id).c_str()) != 0) return errno;
  n.parked = true;
  return 0;
}

void DurabilityModel::maybe_forget(NodeId id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end() || id == root_) return;
  Node& n = it->second;
  if (!n.names.empty() || n.durable_links > 0 || n.open_handles > 0) return;
  if (n.parked) ::unlink(inode_link_path(id).c_str());
  if (n.shadow_fd >= 0) {
    ::close(n.shadow_fd);
    ::unlink(shadow_path(id).c_str());
  }
  std::vector<NodeId> children;
  for (auto& [name, child] : n.durable_entries) children.push_back(child);
  eio_nodes_.erase(id);
  nodes_.erase(it);
  for (NodeId child : children) {
    auto c = nodes_.find(child);
    if (c == nodes_.end()) continue;
    c->second.durable_links--;
    maybe_forget(child);
  }
}

// ---- the journal ------------------------------------------------------------------------------

int64_t DurabilityModel::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
      .count();
}

size_t DurabilityModel::journal_add(const std::string& op, const std::string& path, const std::string& to,
                                    NodeId node, const std::vector<NodeId>& waiting) {
  JournalEntry e;
  e.seq = ++seq_;
  e.time_ns = now_ns();
  e.op = op;
  e.path = path;
  e.to = to;
  e.node = node;
  size_t index = journal_.size();
  for (NodeId w : waiting) {
    if (std::find(e.waiting_nodes.begin(), e.waiting_nodes.end(), w) != e.waiting_nodes.end()) continue;
    const Node& n = nodes_.at(w);
    e.waiting_nodes.push_back(w);
    e.waiting_on.push_back("fsync of " +
                           (n.kind == Kind::kDir ? display_dir(path_of(w)) : display(path_of(w))));
    nodes_[w].waiting_journal.push_back(index);
  }
  if (e.waiting_nodes.empty()) e.durable_seq = e.seq;
  journal_.push_back(std::move(e));
  return index;
}

void DurabilityModel::record_data_change(NodeId id, const std::string& op, uint64_t offset, uint64_t bytes,
                                         bool is_write) {
  Node& n = nodes_[id];
  n.data_dirty = true;
  if (is_write) n.bytes_since_sync += bytes;
  // Writes to one file with no other operation on that file between them are one entry, however
  // other files' writes interleave: a save of 1 GiB in 128 KiB writes by 8 ranks stays 8 lines.
  if (is_write && n.open_write_entry < journal_.size()) {
    JournalEntry& last = journal_[n.open_write_entry];
    if (last.durable_seq == 0) {
      last.bytes += bytes;
      last.offset = std::min(last.offset, offset);
      return;
    }
  }
  size_t index = journal_add(op, path_of(id), "", id, {id});
  journal_[index].offset = offset;
  journal_[index].bytes = bytes;
  nodes_[id].open_write_entry = is_write ? index : SIZE_MAX;
}

void DurabilityModel::mark_durable(NodeId id, uint64_t seq) {
  Node& n = nodes_[id];
  for (size_t index : n.waiting_journal) {
    JournalEntry& e = journal_[index];
    auto it = std::find(e.waiting_nodes.begin(), e.waiting_nodes.end(), id);
    if (it == e.waiting_nodes.end()) continue;
    e.waiting_on.erase(e.waiting_on.begin() + (it - e.waiting_nodes.begin()));
    e.waiting_nodes.erase(it);
    if (e.waiting_nodes.empty() && e.durable_seq == 0) e.durable_seq = seq;
  }
  n.waiting_journal.clear();
}

void DurabilityModel::make_data_durable(NodeId id, uint64_t size, uint64_t seq) {
  Node& n = nodes_[id];
  n.durable_size = size;
  n.data_dirty = false;
  n.ever_synced = true;
  n.bytes_since_sync = 0;
  n.saved.clear();
  n.open_write_entry = SIZE_MAX;
  if (n.shadow_fd >= 0) {
    ::close(n.shadow_fd);
    n.shadow_fd = -1;
    ::unlink(shadow_path(id).c_str());
  }
  mark_durable(id, seq);
}

void DurabilityModel::make_entries_durable(NodeId dir, uint64_t seq) {
  Node& d = nodes_[dir];
  std::vector<NodeId> dropped;
  for (auto& [name, child] : d.durable_entries) {
    auto it = d.entries.find(name);
    if (it == d.entries.end() || it->second != child) {
      nodes_[child].durable_links--;
      dropped.push_back(child);
    }
  }
  for (auto& [name, child] : d.entries) {
    auto it = d.durable_entries.find(name);
    if (it == d.durable_entries.end() || it->second != child) nodes_[child].durable_links++;
  }
  d.durable_entries = d.entries;
  mark_durable(dir, seq);
  for (NodeId child : dropped) maybe_forget(child);
}

// ---- file data --------------------------------------------------------------------------------

// Before [begin, end) of a file changes, the part of it that is still its last durable content is
// copied to the file's shadow (once: `saved` remembers what is there).
Errno DurabilityModel::preserve(NodeId id, int fd, bool fd_readable, uint64_t begin, uint64_t end) {
  Node& n = nodes_[id];
  end = std::min(end, n.durable_size);
  if (begin >= end) return 0;
  auto gaps = n.saved.missing(begin, end);
  if (gaps.empty()) return 0;
  if (n.shadow_fd < 0) {
    n.shadow_fd = ::open(shadow_path(id).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (n.shadow_fd < 0) return errno;
  }
  int read_fd = fd;
  if (!fd_readable) {
    read_fd = ::open(node_backing_path(id).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (read_fd < 0) return errno;
  }
  Errno result = 0;
  for (auto [a, b] : gaps) {
    if ((result = copy_bytes(read_fd, n.shadow_fd, a, b, &copy_buffer_))) break;
    n.saved.add(a, b);
  }
  if (read_fd != fd) ::close(read_fd);
  return result;
}

Errno DurabilityModel::live_handle(HandleId handle, Handle** out) {
  if (frozen_) return EIO;
  auto it = handles_.find(handle);
  if (it == handles_.end()) return EBADF;
  if (it->second.fd < 0) return EIO;  // opened before a power loss
  *out = &it->second;
  return 0;
}

Errno DurabilityModel::open_file(const std::string& path, int flags, mode_t mode, HandleId* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  const int access = flags & O_ACCMODE;
  const bool writable = access != O_RDONLY;
  // O_APPEND, O_DIRECT and O_SYNC stay off the backing descriptor: the caller gives every offset,
  // the model needs no cache bypass, and durability is the model's to decide.
  const int backing_flags = O_NOFOLLOW | O_CLOEXEC;
  NodeId id = 0;
  Errno found = resolve(path, &id);
  int fd = -1;
  bool readable = true;
  if (found == 0) {
    if ((flags & O_CREAT) && (flags & O_EXCL)) return EEXIST;
    const Node& n = nodes_.at(id);
    if (n.kind == Kind::kDir) return EISDIR;
    if (n.kind == Kind::kSymlink) return ELOOP;
    std::string full = backing_path_of(path_of(id));
    fd = ::open(full.c_str(), (access == O_WRONLY ? O_RDWR : access) | backing_flags);
    if (fd < 0 && access == O_WRONLY && errno == EACCES) {
      fd = ::open(full.c_str(), O_WRONLY | backing_flags);
      readable = false;
    }
    if (fd < 0) return errno;
    if ((flags & O_TRUNC) && writable) {
      if (Errno e = truncate_node(id, fd, readable, 0)) {
        ::close(fd);
        return e;
      }
    }
  } else if (found == ENOENT && (flags & O_CREAT)) {
    NodeId parent = 0;
    std::string name;
    if (Errno e = resolve_parent(path, &parent, &name)) return e;
    std::string rel = join_rel(path_of(parent), name);
    fd = ::open(backing_path_of(rel).c_str(),
                O_CREAT | O_EXCL | (access == O_WRONLY ? O_RDWR : access) | backing_flags, mode);
    if (fd < 0) return errno;
    id = new_node(Kind::kFile);
    add_name(id, parent, name);
    journal_add("create", rel, "", id, {parent});
  } else {
    return found;
  }
  HandleId h = next_handle_++;
  Handle& handle_ref = handles_[h];
  handle_ref.fd = fd;
  handle_ref.node = id;
  handle_ref.sync_writes = (flags & O_DSYNC) != 0;  // O_SYNC includes O_DSYNC's bit
  handle_ref.readable = readable;
  handle_ref.path = path_of(id);
  nodes_[id].open_handles++;
  *handle = h;
  return 0;
}

Errno DurabilityModel::read_locked(Handle& h, char* buf, size_t size, uint64_t offset, size_t* done) {
  if (eio_nodes_.count(h.node) || eio_paths_.count(h.path)) return EIO;
  return pread_full(h.fd, buf, size, offset, done);
}

Errno DurabilityModel::read(HandleId handle, char* buf, size_t size, uint64_t offset, size_t* done) {
  std::lock_guard<std::mutex> lock(mu_);
  Handle* h = nullptr;
  if (Errno e = live_handle(handle, &h)) return e;
  return read_locked(*h, buf, size, offset, done);
}

Errno DurabilityModel::write_locked(Handle& h, const char* buf, size_t size, uint64_t offset, size_t* done) {
  *done = 0;
  if (size == 0) return 0;
  if (enospc_armed_) {
    if (enospc_budget_ == 0) return ENOSPC;
    size = static_cast<size_t>(std::min<uint64_t>(size, enospc_budget_));
  }
  if (Errno e = preserve(h.node, h.fd, h.readable, offset, offset + size)) return e;
  Errno e = pwrite_full(h.fd, buf, size, offset, done);
  if (enospc_armed_) enospc_budget_ -= *done;
  if (*done > 0) record_data_change(h.node, "write", offset, *done, true);
  if (e) return e;
  if (h.sync_writes) {
    if (::fdatasync(h.fd) != 0) return errno;
    struct stat st {};
    if (::fstat(h.fd, &st) != 0) return errno;
    uint64_t seq = journal_[journal_add("fdatasync", path_of(h.node), "", h.node, {})].seq;
    make_data_durable(h.node, static_cast<uint64_t>(st.st_size), seq);
  }
  return 0;
}

Errno DurabilityModel::write(HandleId handle, const char* buf, size_t size, uint64_t offset, size_t* done) {
  std::lock_guard<std::mutex> lock(mu_);
  Handle* h = nullptr;
  *done = 0;
  if (Errno e = live_handle(handle, &h)) return e;
  return write_locked(*h, buf, size, offset, done);
}

Errno DurabilityModel::truncate_node(NodeId id, int fd, bool fd_readable, uint64_t size) {
  if (Errno e = preserve(id, fd, fd_readable, size, UINT64_MAX)) return e;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return errno;
  record_data_change(id, "truncate", 0, size, false);
  return 0;
}

Errno DurabilityModel::truncate(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind == Kind::kDir) return EISDIR;
  if (nodes_[id].kind == Kind::kSymlink) return EINVAL;
  int fd = ::open(backing_path_of(path_of(id)).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  Errno e = truncate_node(id, fd, true, size);
  ::close(fd);
  return e;
}

Errno DurabilityModel::ftruncate(HandleId handle, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  Handle* h = nullptr;
  if (Errno e = live_handle(handle, &h)) return e;
  return truncate_node(h->node, h->fd, h->readable, size);
}

Errno DurabilityModel::fallocate(HandleId handle, int mode, uint64_t offset, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  Handle* h = nullptr;
  if (Errno e = live_handle(handle, &h)) return e;
  const int keep = FALLOC_FL_KEEP_SIZE;
  const bool changes_data = mode == (FALLOC_FL_PUNCH_HOLE | keep) || mode == FALLOC_FL_ZERO_RANGE ||
                            mode == (FALLOC_FL_ZERO_RANGE | keep);
  if (!(mode == 0 || mode == keep || changes_data)) return EOPNOTSUPP;
  if (enospc_armed_ && enospc_budget_ == 0 && !(mode & FALLOC_FL_PUNCH_HOLE)) return ENOSPC;
  struct stat before {};
  if (::fstat(h->fd, &before) != 0) return errno;
  if (changes_data)
    if (Errno e = preserve(h->node, h->fd, h->readable, offset, offset + length)) return e;
  if (::fallocate(h->fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) return errno;
  struct stat after {};
  if (::fstat(h->fd, &after) != 0) return errno;
  if (changes_data || after.st_size != before.st_size) {
    record_data_change(h->node, "fallocate", offset, length, false);
  }
  return 0;
}

Errno DurabilityModel::copy_range(HandleId in, uint64_t offset_in, HandleId out, uint64_t offset_out,
                                  size_t size, size_t* done) {
  std::lock_guard<std::mutex> lock(mu_);
  *done = 0;
  Handle *src = nullptr, *dst = nullptr;
  if (Errno e = live_handle(in, &src)) return e;
  if (Errno e = live_handle(out, &dst)) return e;
  if (src->node == dst->node) return EOPNOTSUPP;  // overlapping copies within a file: not modelled
  std::vector<char> buffer(std::min<size_t>(size, kCopyBufferBytes));
  while (*done < size) {
    size_t want = std::min(buffer.size(), size - *done), got = 0, put = 0;
    if (Errno e = read_locked(*src, buffer.data(), want, offset_in + *done, &got)) return *done ? 0 : e;
    if (got == 0) break;
    Errno e = write_locked(*dst, buffer.data(), got, offset_out + *done, &put);
    *done += put;
    if (e) return *done ? 0 : e;
    if (put < got) break;
  }
  return 0;
}

Errno DurabilityModel::fsync(HandleId handle, bool datasync) {
  std::lock_guard<std::mutex> lock(mu_);
  Handle* h = nullptr;
  if (Errno e = live_handle(handle, &h)) return e;
  // The backing file is synced too: the time a program's fsync takes stays realistic.
  if ((datasync ? ::fdatasync(h->fd) : ::fsync(h->fd)) != 0) return errno;
  struct stat st {};
  if (::fstat(h->fd, &st) != 0) return errno;
  uint64_t seq =
      journal_[journal_add(datasync ? "fdatasync" : "fsync", path_of(h->node), "", h->node, {})].seq;
  make_data_durable(h->node, static_cast<uint64_t>(st.st_size), seq);
  return 0;
}

Errno DurabilityModel::release(HandleId handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return EBADF;
  Handle h = it->second;
  handles_.erase(it);
  if (h.fd < 0) return 0;  // dead since a power loss; its node is gone
  ::close(h.fd);
  auto n = nodes_.find(h.node);
  if (n != nodes_.end()) {
    n->second.open_handles--;
    maybe_forget(h.node);
  }
  return 0;
}

// ---- the namespace ------------------------------------------------------------------------------

Errno DurabilityModel::mkdir(const std::string& path, mode_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId parent = 0;
  std::string name;
  if (Errno e = resolve_parent(path, &parent, &name)) return e;
  if (nodes_[parent].entries.count(name)) return EEXIST;
  std::string rel = join_rel(path_of(parent), name);
  if (::mkdir(backing_path_of(rel).c_str(), mode) != 0) return errno;
  NodeId id = new_node(Kind::kDir);
  nodes_[id].mode = mode & 07777;
  add_name(id, parent, name);
  journal_add("mkdir", rel, "", id, {parent});
  return 0;
}

Errno DurabilityModel::rmdir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId parent = 0, id = 0;
  std::string name;
  if (Errno e = resolve_parent(path, &parent, &name)) return e;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind != Kind::kDir) return ENOTDIR;
  std::string rel = path_of(id);
  if (::rmdir(backing_path_of(rel).c_str()) != 0) return errno;
  remove_name(id, parent, name);
  journal_add("rmdir", rel, "", id, {parent});
  maybe_forget(id);
  return 0;
}

Errno DurabilityModel::unlink(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId parent = 0, id = 0;
  std::string name;
  if (Errno e = resolve_parent(path, &parent, &name)) return e;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind == Kind::kDir) return EISDIR;
  std::string rel = join_rel(path_of(parent), name);
  const bool was_parked = nodes_[id].parked;
  if (Errno e = park(id)) return e;
  if (::unlink(backing_path_of(rel).c_str()) != 0) {
    Errno e = errno;
    if (!was_parked && nodes_[id].parked) {
      ::unlink(inode_link_path(id).c_str());
      nodes_[id].parked = false;
    }
    return e;
  }
  remove_name(id, parent, name);
  journal_add("unlink", rel, "", id, {parent});
  maybe_forget(id);
  return 0;
}

Errno DurabilityModel::rename(const std::string& from, const std::string& to, unsigned flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  if (flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) return EINVAL;
  NodeId from_parent = 0, to_parent = 0, id = 0;
  std::string from_name, to_name;
  if (Errno e = resolve_parent(from, &from_parent, &from_name)) return e;
  if (Errno e = resolve(from, &id)) return e;
  if (Errno e = resolve_parent(to, &to_parent, &to_name)) return e;
  auto existing = nodes_[to_parent].entries.find(to_name);
  NodeId target = existing == nodes_[to_parent].entries.end() ? 0 : existing->second;
  if (target && (flags & RENAME_NOREPLACE)) return EEXIST;
  if (target == id) return 0;  // two names of one file: rename(2) does nothing
  std::string from_rel = join_rel(path_of(from_parent), from_name);
  std::string to_rel = join_rel(path_of(to_parent), to_name);
  bool parked_now = false;
  if (target && !nodes_[target].parked) {
    if (Errno e = park(target)) return e;
    parked_now = nodes_[target].parked;
  }
  if (::renameat2(AT_FDCWD, backing_path_of(from_rel).c_str(), AT_FDCWD, backing_path_of(to_rel).c_str(),
                  flags) != 0) {
    Errno e = errno;
    if (parked_now) {
      ::unlink(inode_link_path(target).c_str());
      nodes_[target].parked = false;
    }
    return e;
  }
  if (target) remove_name(target, to_parent, to_name);
  remove_name(id, from_parent, from_name);
  add_name(id, to_parent, to_name);
  journal_add("rename", from_rel, to_rel, id, {from_parent, to_parent});
  if (target) maybe_forget(target);
  return 0;
}

Errno DurabilityModel::link(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0, parent = 0;
  std::string name;
  if (Errno e = resolve(from, &id)) return e;
  if (nodes_[id].kind != Kind::kFile) return EPERM;
  if (Errno e = resolve_parent(to, &parent, &name)) return e;
  if (nodes_[parent].entries.count(name)) return EEXIST;
  std::string to_rel = join_rel(path_of(parent), name);
  if (::link(backing_path_of(path_of(id)).c_str(), backing_path_of(to_rel).c_str()) != 0) return errno;
  std::string from_rel = path_of(id);
  add_name(id, parent, name);
  journal_add("link", from_rel, to_rel, id, {parent});
  return 0;
}

Errno DurabilityModel::symlink(const std::string& target, const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId parent = 0;
  std::string name;
  if (Errno e = resolve_parent(path, &parent, &name)) return e;
  if (nodes_[parent].entries.count(name)) return EEXIST;
  std::string rel = join_rel(path_of(parent), name);
  if (::symlink(target.c_str(), backing_path_of(rel).c_str()) != 0) return errno;
  NodeId id = new_node(Kind::kSymlink);
  nodes_[id].symlink_target = target;
  add_name(id, parent, name);
  journal_add("symlink", rel, "", id, {parent});
  return 0;
}

Errno DurabilityModel::readlink(const std::string& path, std::string* target) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind != Kind::kSymlink) return EINVAL;
  *target = nodes_[id].symlink_target;
  return 0;
}

Errno DurabilityModel::fsync_dir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind != Kind::kDir) return ENOTDIR;
  std::string rel = path_of(id);
  int fd = ::open(backing_path_of(rel).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd);
  Errno e = rc == 0 ? 0 : errno;
  ::close(fd);
  if (e) return e;
  uint64_t seq = journal_[journal_add("fsync-dir", rel, "", id, {})].seq;
  make_entries_durable(id, seq);
  return 0;
}

Errno DurabilityModel::sync() {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  int fd = ::open(backing_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  ::syncfs(fd);
  ::close(fd);
  uint64_t seq = journal_[journal_add("sync", "", "", 0, {})].seq;
  // Sizes first: a file open only by a handle has no name to stat.
  std::unordered_map<NodeId, uint64_t> sizes;
  for (auto& [hid, h] : handles_) {
    struct stat st {};
    if (h.fd >= 0 && ::fstat(h.fd, &st) == 0) sizes[h.node] = static_cast<uint64_t>(st.st_size);
  }
  std::vector<NodeId> ids;
  for (auto& [id, n] : nodes_) ids.push_back(id);
  for (NodeId id : ids) {
    auto it = nodes_.find(id);
    if (it == nodes_.end() || it->second.kind != Kind::kFile) continue;
    uint64_t size = it->second.durable_size;
    struct stat st {};
    if (sizes.count(id))
      size = sizes[id];
    else if (::lstat(node_backing_path(id).c_str(), &st) == 0)
      size = static_cast<uint64_t>(st.st_size);
    make_data_durable(id, size, seq);
  }
  for (NodeId id : ids) {
    auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second.kind == Kind::kDir) make_entries_durable(id, seq);
  }
  for (JournalEntry& e : journal_) {
    e.waiting_on.clear();
    e.waiting_nodes.clear();
    if (e.durable_seq == 0) e.durable_seq = seq;
  }
  for (auto& [id, n] : nodes_) n.waiting_journal.clear();
  return 0;
}

// ---- passthrough --------------------------------------------------------------------------------

Errno DurabilityModel::stat(const std::string& path, struct stat* st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  if (::lstat(backing_path_of(path_of(id)).c_str(), st) != 0) return errno;
  return 0;
}

Errno DurabilityModel::fstat(HandleId handle, struct stat* st) {
  std::lock_guard<std::mutex> lock(mu_);
  Handle* h = nullptr;
  if (Errno e = live_handle(handle, &h)) return e;
  return ::fstat(h->fd, st) == 0 ? 0 : errno;
}

Errno DurabilityModel::list_dir(const std::string& path, std::vector<DirEntry>* entries) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind != Kind::kDir) return ENOTDIR;
  entries->clear();
  std::string dir = path_of(id);
  for (auto& [name, child] : nodes_[id].entries) {
    struct stat st {};
    if (::lstat(backing_path_of(join_rel(dir, name)).c_str(), &st) != 0) continue;
    entries->push_back({name, st.st_mode & S_IFMT, st.st_ino});
  }
  return 0;
}

Errno DurabilityModel::statfs(struct statvfs* st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  return ::statvfs(backing_.c_str(), st) == 0 ? 0 : errno;
}

Errno DurabilityModel::chmod(const std::string& path, mode_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  if (nodes_[id].kind == Kind::kSymlink) return EOPNOTSUPP;
  return ::chmod(backing_path_of(path_of(id)).c_str(), mode) == 0 ? 0 : errno;
}

Errno DurabilityModel::chown(const std::string& path, uid_t uid, gid_t gid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  return ::lchown(backing_path_of(path_of(id)).c_str(), uid, gid) == 0 ? 0 : errno;
}

Errno DurabilityModel::utimens(const std::string& path, const struct timespec times[2]) {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return EIO;
  NodeId id = 0;
  if (Errno e = resolve(path, &id)) return e;
  return ::utimensat(AT_FDCWD, backing_path_of(path_of(id)).c_str(), times, AT_SYMLINK_NOFOLLOW) == 0 ? 0
                                                                                                      : errno;
}

// ---- faults -------------------------------------------------------------------------------------

void DurabilityModel::enospc_after(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  enospc_armed_ = true;
  enospc_budget_ = bytes;
}

void DurabilityModel::eio_on_read(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> parts;
  split_path(path, &parts);
  std::string rel;
  for (const std::string& p : parts) rel = join_rel(rel, p);
  eio_paths_.insert(rel);
  NodeId id = 0;
  if (resolve(rel, &id) == 0) eio_nodes_.insert(id);
}

void DurabilityModel::clear_faults() {
  std::lock_guard<std::mutex> lock(mu_);
  enospc_armed_ = false;
  enospc_budget_ = 0;
  eio_paths_.clear();
  eio_nodes_.clear();
}

bool DurabilityModel::frozen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frozen_;
}

void DurabilityModel::recover() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!frozen_) return;
  frozen_ = false;
  journal_add("recover", "", "", 0, {});
}

bool DurabilityModel::has_name(NodeId id, const std::string& rel) const {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  for (auto& [parent, name] : it->second.names)
    if (join_rel(path_of(parent), name) == rel) return true;
  return false;
}

bool DurabilityModel::durably_named(const std::vector<NodeId>& dirs, const std::string& rel,
                                    NodeId id) const {
  size_t slash = rel.rfind('/');
  std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  for (NodeId dir : dirs) {
    auto it = nodes_.find(dir);
    if (it == nodes_.end()) continue;
    auto entry = it->second.durable_entries.find(name);
    if (entry != it->second.durable_entries.end() && entry->second == id) return true;
  }
  return false;
}

std::vector<Loss> DurabilityModel::compute_losses() const {
  std::vector<Loss> losses;
  std::set<NodeId> data_reported;
  for (const JournalEntry& e : journal_) {
    if (e.durable_seq != 0 || e.lost) continue;  // durable, or lost at an earlier power loss
    std::string missing;
    for (const std::string& w : e.waiting_on) missing += (missing.empty() ? "" : " and ") + w;
    if (is_data_op(e.op)) {
      auto it = nodes_.find(e.node);
      if (it == nodes_.end() || !data_reported.insert(e.node).second) continue;
      const Node& n = it->second;
      if (!n.data_dirty || (n.names.empty() && n.durable_links == 0)) continue;
      std::string path = display(path_of(e.node));
      std::string what;
      if (n.bytes_since_sync > 0) {
        what = path + ": " + byte_size_text(static_cast<double>(n.bytes_since_sync)) +
               (n.ever_synced ? " written after its last fsync" : " written, never fsynced") + " — lost";
      } else {
        what = path + ": size changed, never fsynced — reverts to " +
               byte_size_text(static_cast<double>(n.durable_size));
      }
      losses.push_back({path, what, "fsync of " + path});
      continue;
    }
    // A name that is gone again by now (a temp file renamed, a file never durable then deleted) is
    // told by the later entry, or matters to no one.
    if (e.op == "create" && !has_name(e.node, e.path)) continue;
    if (e.op == "unlink" && !durably_named(e.waiting_nodes, e.path, e.node)) continue;
    std::string what;
    if (e.op == "rename")
      what = "rename " + display(e.path) + " -> " + display(e.to) + " not durable: no " + missing;
    else if (e.op == "create")
      what = display(e.path) + ": created, but its directory entry never became durable: no " + missing +
             " — the file vanishes";
    else if (e.op == "unlink")
      what = "unlink " + display(e.path) + " not durable: no " + missing + " — the file comes back";
    else if (e.op == "mkdir" || e.op == "rmdir" || e.op == "symlink")
      what = e.op + " " + display(e.path) + " not durable: no " + missing;
    else if (e.op == "link")
      what = "link " + display(e.path) + " -> " + display(e.to) + " not durable: no " + missing;
    else
      continue;
    losses.push_back({display(e.op == "rename" || e.op == "link" ? e.to : e.path), what, missing});
  }
  return losses;
}

Result<std::vector<Loss>> DurabilityModel::power_loss() {
  std::lock_guard<std::mutex> lock(mu_);
  if (frozen_) return last_losses_;
  frozen_ = true;
  last_losses_ = compute_losses();
  journal_add("power-loss", "", "", 0, {});
  for (JournalEntry& e : journal_)
    if (e.durable_seq == 0 && e.op != "power-loss") e.lost = true;
  Status rolled = rollback();
  if (!rolled.is_ok()) return rolled;
  return last_losses_;
}

// Rebuilds the backing directory as the durable entries describe it, from the root down. Every file
// a durable entry names is first held by a hard link in <state>/inodes and given back its durable
// content; then the backing directory is emptied and refilled from those links.
Status DurabilityModel::rollback() {
  struct Item {
    std::string rel;
    NodeId id;
  };
  std::vector<Item> items;
  std::set<NodeId> dirs_seen{root_};
  std::function<void(NodeId, const std::string&)> walk = [&](NodeId dir, const std::string& rel) {
    for (auto& [name, child] : nodes_.at(dir).durable_entries) {
      const Node& c = nodes_.at(child);
      std::string child_rel = join_rel(rel, name);
      // A directory renamed between two directories and durable on both sides: it comes back once.
      if (c.kind == Kind::kDir && !dirs_seen.insert(child).second) continue;
      items.push_back({child_rel, child});
      if (c.kind == Kind::kDir) walk(child, child_rel);
    }
  };
  walk(root_, "");

  std::set<NodeId> files;
  for (const Item& item : items) {
    Node& n = nodes_.at(item.id);
    if (n.kind != Kind::kFile || !files.insert(item.id).second) continue;
    if (!n.parked) {
      if (::link(node_backing_path(item.id).c_str(), inode_link_path(item.id).c_str()) != 0)
        return Status::io_error("faultfs power loss: link " + node_backing_path(item.id) + " -> " +
                                inode_link_path(item.id) + ": " + errno_text(errno));
      n.parked = true;
    }
    int fd = ::open(inode_link_path(item.id).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return Status::io_error("faultfs power loss: open " + inode_link_path(item.id) + ": " +
                              errno_text(errno));
    Errno e = 0;
    for (auto [begin, end] : n.saved.ranges())
      if ((e = copy_bytes(n.shadow_fd, fd, begin, end, &copy_buffer_))) break;
    if (!e && ::ftruncate(fd, static_cast<off_t>(n.durable_size)) != 0) e = errno;
    if (!e && ::fsync(fd) != 0) e = errno;
    ::close(fd);
    if (e) return Status::io_error("faultfs power loss: restoring " + item.rel + ": " + errno_text(e));
  }
  for (auto& [hid, h] : handles_) {
    if (h.fd >= 0) ::close(h.fd);
    h.fd = -1;
    h.node = 0;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(backing_, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
    if (ec)
      return Status::io_error("faultfs power loss: removing " + entry.path().string() + ": " + ec.message());
  }
  if (ec) return Status::io_error("faultfs power loss: listing " + backing_ + ": " + ec.message());
  for (const Item& item : items) {
    const Node& n = nodes_.at(item.id);
    std::string full = backing_path_of(item.rel);
    int rc = 0;
    if (n.kind == Kind::kDir)
      rc = ::mkdir(full.c_str(), n.mode);
    else if (n.kind == Kind::kSymlink)
      rc = ::symlink(n.symlink_target.c_str(), full.c_str());
    else
      rc = ::link(inode_link_path(item.id).c_str(), full.c_str());
    if (rc != 0) return Status::io_error("faultfs power loss: recreating " + full + ": " + errno_text(errno));
  }
  for (const char* sub : {"shadow", "inodes"}) {
    std::filesystem::remove_all(state_ + "/" + sub, ec);
    ::mkdir((state_ + "/" + sub).c_str(), 0700);
  }
  eio_nodes_.clear();
  CKPT_RETURN_IF_ERROR(scan());
  for (const std::string& path : eio_paths_) {
    NodeId id = 0;
    if (resolve(path, &id) == 0) eio_nodes_.insert(id);
  }
  return Status::ok();
}

std::vector<JournalEntry> DurabilityModel::journal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return journal_;
}

std::vector<Loss> DurabilityModel::last_losses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_losses_;
}

std::string DurabilityModel::journal_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  return faultfs::journal_json(journal_, last_losses_);
}

}  // namespace ckpt::faultfs
