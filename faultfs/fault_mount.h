// Starting, driving and stopping `ckptcheck-faultfs` from C++: what the drill and the tests call.
//
//   FaultMountOptions options;
//   options.program = dir_of_ckptcheck + "/ckptcheck-faultfs";
//   options.backing_dir = work + "/backing";   // the checkpoints really live here
//   options.state_dir = work + "/faultfs-state";  // same file system as backing_dir, outside it
//   options.mountpoint = work + "/ckpt";       // what the subject is told to write to
//   CKPT_ASSIGN_OR_RETURN(auto mount, FaultMount::start(options));
//   ... run the subject against options.mountpoint ...
//   CKPT_ASSIGN_OR_RETURN(std::string losses, mount->power_loss());  // JSON, faultfs/journal.h
//   CKPT_RETURN_IF_ERROR(mount->recover());
//   ... verify / relaunch ...
//   // ~FaultMount (or stop()) stops the daemon and unmounts, on every exit path.
//
// A daemon that dies on its own (SIGKILL, a crash) leaves its mount answering "Transport endpoint is
// not connected": stop() and start() both detach it with unmount_lazily(), and a parent that dies
// takes the daemon with it (PR_SET_PDEATHSIG: SIGTERM, on which the daemon unmounts itself). The
// death signal follows the *thread* that called start(): call it from a thread that outlives the mount.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace ckpt::faultfs {

// The file system type the daemon mounts with, as /proc/self/mountinfo shows it.
inline constexpr const char* kFaultfsMountType = "fuse.ckptcheck-faultfs";
inline constexpr const char* kFusermount = "/usr/bin/fusermount3";

// `/usr/bin/fusermount3 -u -z MOUNTPOINT`: detaches a FUSE mount even when its daemon is dead. Ok
// when nothing is mounted there.
Status unmount_lazily(const std::string& mountpoint);
// Whether /proc/self/mountinfo lists a mount at `mountpoint` (any type when `type` is empty).
bool is_mounted(const std::string& mountpoint, const std::string& type = kFaultfsMountType);

struct FaultMountOptions {
  std::string program;          // the ckptcheck-faultfs executable
  std::string backing_dir;      // must exist
  std::string state_dir;        // created if missing; holds control.sock, daemon.log, shadows
  std::string mountpoint;       // must exist (an empty directory)
  std::string root_name = ".";  // how loss messages name the mount's root ("ckpt" -> "no fsync of ckpt/")
  int mount_timeout_ms = 10000;
};

class FaultMount {
 public:
  // Starts the daemon (fork/exec), waits until /proc/self/mountinfo shows the mount and the control
  // socket answers. On failure nothing is left running or mounted; the message quotes the daemon's log.
  static Result<std::unique_ptr<FaultMount>> start(const FaultMountOptions& options);
  ~FaultMount();  // stop(), its Status ignored
  FaultMount(const FaultMount&) = delete;
  FaultMount& operator=(const FaultMount&) = delete;

  // SIGTERM (the daemon unmounts itself), SIGKILL after 5 s, then a lazy unmount if the mount is
  // still there. Idempotent.
  Status stop();

  // One control command (faultfs/control_protocol.h); the reply's payload after "ok".
  Result<std::string> command(const std::string& line) const;
  Result<std::string> power_loss() const { return command("power-loss"); }  // {"losses":[..]}
  Status recover() const { return command("recover").status(); }
  Status sync() const { return command("sync").status(); }
  Status enospc_after(uint64_t bytes) const {
    return command("enospc-after " + std::to_string(bytes)).status();
  }
  Status eio_read(const std::string& path) const { return command("eio-read " + path).status(); }
  Status clear_faults() const { return command("clear").status(); }
  Result<std::string> journal() const { return command("journal"); }  // {"entries":[..],"losses":[..]}

  pid_t pid() const { return pid_; }
  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& control_socket() const { return socket_; }
  const std::string& log_path() const { return log_; }

 private:
  FaultMount(pid_t pid, std::string mountpoint, std::string socket, std::string log)
      : pid_(pid), mountpoint_(std::move(mountpoint)), socket_(std::move(socket)), log_(std::move(log)) {}
  pid_t pid_;
  std::string mountpoint_, socket_, log_;
};

}  // namespace ckpt::faultfs
