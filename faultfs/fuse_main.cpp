// ckptcheck-faultfs: the durability model (faultfs/durability_model.h) mounted with libfuse3, so a
// program writes its checkpoints through it unchanged. Its own program so that `ckptcheck` never
// links libfuse.
//
//   ckptcheck-faultfs --backing DIR --state DIR --control SOCKET [--root-name NAME] MOUNTPOINT
//
// Runs in the foreground, single-threaded; SIGTERM, SIGINT or SIGHUP unmount and exit 0. A daemon
// killed any other way leaves its mount point dead until `fusermount3 -u -z MOUNTPOINT`
// (faultfs::unmount_lazily). Choices (docs/faultfs.md says why):
//   - page cache on (no direct_io), writeback cache off: every write(2) reaches the model before it
//     returns, and shared writable mmap works, its pages reaching the model at msync, fsync or close;
//   - attribute, entry and negative caches off and no kernel_cache: after a power loss, the next
//     open and lookup see the rolled-back backing directory, not the kernel's memory of it;
//   - no xattr operations: the kernel answers EOPNOTSUPP, and stops asking on every write.
#define FUSE_USE_VERSION 35

#include <fuse.h>
#include <fuse_lowlevel.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "faultfs/control_protocol.h"
#include "faultfs/durability_model.h"
#include "faultfs/kill_gate.h"

namespace {

using ckpt::faultfs::DirEntry;
using ckpt::faultfs::DurabilityModel;
using ckpt::faultfs::Errno;
using ckpt::faultfs::HandleId;
using ckpt::faultfs::KillGate;

// The drill's kill point (faultfs/kill_gate.h): each mutating request is offered to it after it is
// served and before it is answered. The mount's only thread sleeps there while a request is held.
KillGate g_gate;

// `rc` unchanged: the gate only ever delays the reply of a request that succeeded.
int gated(int rc, const char* op, const char* path) {
  if (rc == 0 && path) g_gate.after_change(op, path);
  return rc;
}

DurabilityModel* model() {
  return static_cast<DurabilityModel*>(fuse_get_context()->private_data);
}

void* fs_init(fuse_conn_info* conn, fuse_config* cfg) {
  cfg->use_ino = 1;
  // Off: with it on, libfuse passes no path to any op that has a handle (fsyncdir included); off, the
  // path is NULL only for an open file or directory whose name is gone.
  cfg->nullpath_ok = 0;
  cfg->hard_remove = 1;  // the model holds the open backing descriptor: no .fuse_hidden files
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->direct_io = 0;
  cfg->kernel_cache = 0;
  cfg->auto_cache = 0;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  conn->max_write = 1 << 20;
  return fuse_get_context()->private_data;
}

int fs_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  Errno e = fi ? model()->fstat(fi->fh, st) : model()->stat(path, st);
  return -e;
}

int fs_readlink(const char* path, char* buf, size_t size) {
  std::string target;
  if (Errno e = model()->readlink(path, &target)) return -e;
  if (size == 0) return -EINVAL;
  size_t n = std::min(target.size(), size - 1);
  std::memcpy(buf, target.data(), n);
  buf[n] = '\0';
  return 0;
}

int fs_mknod(const char* path, mode_t mode, dev_t) {
  if (!S_ISREG(mode)) return -EOPNOTSUPP;  // FIFOs and devices: the model cannot bring them back
  HandleId h = 0;
  if (Errno e = model()->open_file(path, O_CREAT | O_EXCL | O_WRONLY, mode & 07777, &h)) return -e;
  return gated(-model()->release(h), "create", path);
}

int fs_mkdir(const char* path, mode_t mode) {
  return gated(-model()->mkdir(path, mode), "mkdir", path);
}
int fs_unlink(const char* path) {
  return -model()->unlink(path);
}
int fs_rmdir(const char* path) {
  return -model()->rmdir(path);
}
int fs_symlink(const char* target, const char* path) {
  return gated(-model()->symlink(target, path), "symlink", path);
}
int fs_rename(const char* from, const char* to, unsigned int flags) {
  const int rc = gated(-model()->rename(from, to, flags), "rename", to);
  return rc == 0 ? gated(rc, "rename", from) : rc;
}
int fs_link(const char* from, const char* to) {
  return gated(-model()->link(from, to), "link", to);
}

int fs_chmod(const char* path, mode_t mode, fuse_file_info*) {
  return path ? -model()->chmod(path, mode) : 0;  // an unlinked file's mode: nothing to model
}

int fs_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info*) {
  return path ? -model()->chown(path, uid, gid) : 0;
}

int fs_truncate(const char* path, off_t size, fuse_file_info* fi) {
  if (size < 0) return -EINVAL;
  return gated(fi ? -model()->ftruncate(fi->fh, static_cast<uint64_t>(size))
                  : -model()->truncate(path, static_cast<uint64_t>(size)),
               "truncate", path);
}

int fs_open(const char* path, fuse_file_info* fi) {
  HandleId h = 0;
  if (Errno e = model()->open_file(path, fi->flags, 0, &h)) return -e;
  fi->fh = h;
  return (fi->flags & O_TRUNC) ? gated(0, "truncate", path) : 0;
}

int fs_create(const char* path, mode_t mode, fuse_file_info* fi) {
  HandleId h = 0;
  if (Errno e = model()->open_file(path, fi->flags | O_CREAT, mode, &h)) return -e;
  fi->fh = h;
  return gated(0, "create", path);
}

int fs_read(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  size_t done = 0;
  if (Errno e = model()->read(fi->fh, buf, size, static_cast<uint64_t>(offset), &done)) return -e;
  return static_cast<int>(done);
}

int fs_write(const char* path, const char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  size_t done = 0;
  Errno e = model()->write(fi->fh, buf, size, static_cast<uint64_t>(offset), &done);
  if (e && done == 0) return -e;
  if (path) g_gate.after_write(path, buf, done);
  return static_cast<int>(done);
}

int fs_statfs(const char*, struct statvfs* st) {
  return -model()->statfs(st);
}

// close(2) makes nothing durable; it only fails like everything else once the power is gone.
int fs_flush(const char*, fuse_file_info*) {
  return model()->frozen() ? -EIO : 0;
}

int fs_release(const char*, fuse_file_info* fi) {
  return -model()->release(fi->fh);
}

int fs_fsync(const char*, int datasync, fuse_file_info* fi) {
  return -model()->fsync(fi->fh, datasync != 0);
}

int fs_readdir(const char* path, void* buf, fuse_fill_dir_t filler, off_t, fuse_file_info*,
               fuse_readdir_flags) {
  if (!path) return -ENOENT;
  std::vector<DirEntry> entries;
  if (Errno e = model()->list_dir(path, &entries)) return -e;
  filler(buf, ".", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  filler(buf, "..", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  for (const DirEntry& entry : entries) {
    struct stat st {};
    st.st_mode = entry.mode;
    st.st_ino = entry.ino;
    if (filler(buf, entry.name.c_str(), &st, 0, static_cast<fuse_fill_dir_flags>(0))) break;
  }
  return 0;
}

int fs_fsyncdir(const char* path, int, fuse_file_info*) {
  if (!path) return model()->frozen() ? -EIO : 0;  // removed since opendir: nothing left to make durable
  return -model()->fsync_dir(path);
}

int fs_utimens(const char* path, const struct timespec tv[2], fuse_file_info*) {
  return path ? -model()->utimens(path, tv) : 0;
}

int fs_fallocate(const char* path, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  if (offset < 0 || length <= 0) return -EINVAL;
  return gated(
      -model()->fallocate(fi->fh, mode, static_cast<uint64_t>(offset), static_cast<uint64_t>(length)),
      "fallocate", path);
}

ssize_t fs_copy_file_range(const char*, fuse_file_info* fi_in, off_t offset_in, const char* path_out,
                           fuse_file_info* fi_out, off_t offset_out, size_t size, int flags) {
  if (flags != 0) return -EINVAL;
  size_t done = 0;
  if (Errno e = model()->copy_range(fi_in->fh, static_cast<uint64_t>(offset_in), fi_out->fh,
                                    static_cast<uint64_t>(offset_out), size, &done))
    return -e;
  gated(0, "copy_file_range", path_out);
  return static_cast<ssize_t>(done);
}

fuse_operations make_operations() {
  fuse_operations ops{};
  ops.init = fs_init;
  ops.getattr = fs_getattr;
  ops.readlink = fs_readlink;
  ops.mknod = fs_mknod;
  ops.mkdir = fs_mkdir;
  ops.unlink = fs_unlink;
  ops.rmdir = fs_rmdir;
  ops.symlink = fs_symlink;
  ops.rename = fs_rename;
  ops.link = fs_link;
  ops.chmod = fs_chmod;
  ops.chown = fs_chown;
  ops.truncate = fs_truncate;
  ops.open = fs_open;
  ops.create = fs_create;
  ops.read = fs_read;
  ops.write = fs_write;
  ops.statfs = fs_statfs;
  ops.flush = fs_flush;
  ops.release = fs_release;
  ops.fsync = fs_fsync;
  ops.readdir = fs_readdir;
  ops.fsyncdir = fs_fsyncdir;
  ops.utimens = fs_utimens;
  ops.fallocate = fs_fallocate;
  ops.copy_file_range = fs_copy_file_range;
  return ops;
}

int usage(const char* message) {
  std::fprintf(stderr,
               "ckptcheck-faultfs: %s\nusage: ckptcheck-faultfs --backing DIR --state DIR --control SOCKET "
               "[--root-name NAME] MOUNTPOINT\n",
               message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backing, state, control, root_name = ".", mountpoint;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string* value = arg == "--backing"     ? &backing
                         : arg == "--state"     ? &state
                         : arg == "--control"   ? &control
                         : arg == "--root-name" ? &root_name
                                                : nullptr;
    if (value) {
      if (i + 1 >= argc) return usage((arg + " needs a value").c_str());
      *value = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown flag " + arg).c_str());
    } else if (!mountpoint.empty()) {
      return usage("one mount point only");
    } else {
      mountpoint = arg;
    }
  }
  if (backing.empty() || state.empty() || control.empty() || mountpoint.empty())
    return usage("--backing, --state, --control and a mount point are required");

  auto model = DurabilityModel::open(backing, state, root_name);
  if (!model.is_ok()) {
    std::fprintf(stderr, "ckptcheck-faultfs: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto server = ckpt::faultfs::ControlServer::listen(control, **model, &g_gate);
  if (!server.is_ok()) {
    std::fprintf(stderr, "ckptcheck-faultfs: %s\n", server.status().to_string().c_str());
    return 1;
  }
  std::string options = "fsname=ckptcheck-faultfs,subtype=ckptcheck-faultfs";
  if (::geteuid() == 0) options += ",allow_other";  // the subject may run as another user
  std::vector<std::string> fuse_args = {argv[0], "-f", "-s", "-o", options, mountpoint};
  if (std::getenv("CKPTCHECK_FAULTFS_DEBUG")) fuse_args.push_back("-d");  // libfuse logs every request
  std::vector<char*> fuse_argv;
  for (std::string& a : fuse_args) fuse_argv.push_back(a.data());
  fuse_operations ops = make_operations();
  // Asked from inside a held request (the FUSE thread): a SIGTERM ends the hold, so the loop can
  // end and unmount.
  g_gate.set_stop_check([] {
    fuse_context* c = fuse_get_context();
    return c && c->fuse && fuse_session_exited(fuse_get_session(c->fuse));
  });
  // fuse_main installs the SIGTERM/SIGINT/SIGHUP handlers that end the loop and unmount.
  int rc = fuse_main(static_cast<int>(fuse_argv.size()), fuse_argv.data(), &ops, model->get());
  return rc;
}
