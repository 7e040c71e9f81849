// The fault file system's control channel: one command line in, one reply line out, over a unix
// stream socket (one connection per command). docs/faultfs.md lists the commands:
//
//   ping                 -> ok
//   power-loss           -> ok {"losses":[{"path":..,"message":..,"missing_call":..}]}
//                           (kill switch: every operation fails with EIO from now on, and the
//                           backing directory is reset to its durable state; idempotent)
//   recover              -> ok          (operations work again, on what survived)
//   sync                 -> ok          (what sync(2) would do; FUSE never forwards a program's sync)
//   enospc-after BYTES   -> ok          (writes fail with ENOSPC once BYTES more have been written)
//   eio-read PATH        -> ok          (reads of PATH, relative to the mount, fail with EIO)
//   clear                -> ok          (no more ENOSPC or EIO faults; the journal stays)
//   journal              -> ok {"entries":[..],"losses":[..]}   (faultfs/journal.h)
//   gate SPEC            -> ok          (arms the kill gate, faultfs/kill_gate.h: `after-save METRICS
//                                        STEP`, `during-save METRICS CKPT_DIR STEP`, `after-step
//                                        METRICS STEP` or `first-change CKPT_DIR`)
//   gate-wait MS         -> ok held {"op":..,"path":..} | ok waiting   (waits up to MS for a held request)
//   gate-release         -> ok          (the held request replies; the gate disarms)
//
// Anything else, or a command that fails: `error <message>`.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "faultfs/durability_model.h"
#include "faultfs/kill_gate.h"

namespace ckpt::faultfs {

// Runs one command line (without its newline) against the model; returns the reply line.
// `gate` serves the gate-* commands (none: they are refused).
std::string execute_control_command(DurabilityModel& model, const std::string& line,
                                    KillGate* gate = nullptr);

// Client side: sends `line` to the daemon listening at `socket_path` and returns the reply's payload
// after "ok" ("" for a bare ok). An `error ...` reply is an invalid_argument Status with its message;
// no daemon, or none answering within `timeout_ms`, is an I/O error.
Result<std::string> send_control_command(const std::string& socket_path, const std::string& line,
                                         int timeout_ms = 60000);

// Serves the protocol on a unix socket from a thread of its own, until destroyed.
class ControlServer {
 public:
  static Result<std::unique_ptr<ControlServer>> listen(const std::string& socket_path, DurabilityModel& model,
                                                       KillGate* gate = nullptr);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

 private:
  ControlServer(std::string path, int listen_fd, int wake_read, int wake_write, DurabilityModel& model,
                KillGate* gate);
  void serve();
  std::string path_;
  int listen_fd_, wake_read_, wake_write_;
  DurabilityModel& model_;
  KillGate* gate_;
  std::thread thread_;
};

}  // namespace ckpt::faultfs
