// The drill's kill point, held inside the file system: ckptcheck-faultfs serves the request that
// reaches it (the write that completes a program's checkpoint event line, or the first change a save
// makes to its checkpoint dir) and then does not reply until the drill says so. The writer sleeps in
// that request, so the drill's SIGKILL lands there however fast the program is and however busy the
// machine: a process waiting on a FUSE request the daemon has taken waits it out even when killed,
// and dies on its way back to user space, before its next instruction (docs/drill.md, "the kill
// point").
//
//   after-save METRICS STEP          hold the write that completes the line
//                                    {"event": "checkpoint", "step": STEP, ...} in METRICS
//   during-save METRICS CKPT AFTER   hold the first change under CKPT (a create, mkdir, link, rename,
//                                    write, truncate, fallocate) once METRICS has had the checkpoint
//                                    event of step AFTER (none when AFTER <= 0) and then a step line
//                                    past it: the first request of the next save
//   after-step METRICS AFTER         hold the write that completes that step line past the event of
//                                    AFTER: during-save's arming moment, on a mount that does not
//                                    hold the checkpoint dir
//   first-change CKPT                hold the first change under CKPT from now on (armed at once):
//                                    during-save's hold, on a mount that does not hold the metrics
//
// The last two split during-save over two mounts (the storage fault power-loss-mid-save: the run dir
// on one, the checkpoint dir that loses power on the other): the drill arms `first-change` on the
// checkpoint dir's mount while the program sleeps in the step line held by `after-step`.
//
// Paths are relative to the mount. The request itself is served (the event line is in the file, the
// first name exists), so what the drill reads afterwards is what the program had done at the kill.
// Torch-free and FUSE-free: the FUSE front calls `after_*`, the control socket arms, waits and releases.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "base/status.h"

namespace ckpt::faultfs {

class KillGate {
 public:
  // "after-save METRICS STEP", "during-save METRICS CKPT AFTER", "after-step METRICS AFTER" or
  // "first-change CKPT"; replaces an earlier arming.
  Status arm(const std::string& spec);

  // Called by the FUSE front after serving a request and before replying to it; returns at once,
  // or once the drill has released a request that reached the kill point. `path` is the mount's
  // ("/metrics.jsonl"); `data` the bytes a write wrote.
  void after_write(const std::string& path, const char* data, size_t size);
  void after_change(const char* op, const std::string& path);

  // Control side. Waits up to `timeout_ms` for a request to be held; its JSON
  // ({"op": .., "path": .., "line": ..}) or nullopt.
  std::optional<std::string> wait_held(int timeout_ms);
  // Lets the held request (if any) reply, and disarms: later requests pass.
  void release();

  // Ends a hold when the daemon is asked to stop (its SIGTERM), so a drill that died never leaves
  // the mount's only thread asleep.
  void set_stop_check(std::function<bool()> stopping) { stopping_ = std::move(stopping); }

 private:
  enum class Mode { kOff, kAfterEvent, kAfterStep, kFirstSaveChange };
  // Feeds appended metrics bytes; true when they reach the kill point. Holds mu_.
  bool feed_metrics(const char* data, size_t size, std::string* line);
  bool under_checkpoint_dir(const std::string& path) const;
  void hold(std::unique_lock<std::mutex>& lock, std::string what);

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<bool()> stopping_;
  Mode mode_ = Mode::kOff;
  std::string metrics_, ckpt_dir_;  // "/metrics.jsonl", "/ckpt"
  int64_t step_ = 0;
  bool event_seen_ = false, armed_ = false;  // during-save: the arming event, then a step past it
  std::string partial_;                      // the metrics file's bytes after its last newline
  bool held_ = false, released_ = false;
  std::string what_;
};

}  // namespace ckpt::faultfs
