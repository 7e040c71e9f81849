// Watches a running program for the moment the drill kills it: the metrics file for checkpoint
// events (after-save: the step-N event), and the checkpoint directory for the first file or
// directory created after a given event (during-save: the program has started writing its next
// checkpoint and has not announced it). Torch-free, Linux (inotify).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "verifier/process/running_program.h"
#include "verifier/tensors/state_compare.h"

namespace ckpt {

// Reads the lines a program appends to its metrics file, as it appends them.
class MetricsTail {
 public:
  // Relative checkpoint paths are resolved against `checkpoint_dir` (resolve_announced_path).
  explicit MetricsTail(std::string path, std::string checkpoint_dir = "")
      : path_(std::move(path)), checkpoint_dir_(std::move(checkpoint_dir)) {}
  // Reads what was appended since the last call; true if a checkpoint event of `step` has been seen.
  bool poll_for_checkpoint(int64_t step, CheckpointEvent* found);
  // The highest step of a step line read so far by poll_for_checkpoint; -1 before the first.
  int64_t last_step() const { return last_step_; }
  // Called with every complete line as poll_for_checkpoint reads it (the drill's timeline of a run).
  void set_line_observer(std::function<void(const std::string&)> observer) { on_line_ = std::move(observer); }

 private:
  std::string path_, checkpoint_dir_;
  int64_t last_step_ = -1;
  uint64_t offset_ = 0;
  std::string partial_;
  std::function<void(const std::string&)> on_line_;
};

struct WatchOutcome {
  bool triggered = false;          // the awaited moment came and the child was SIGKILLed then
  CheckpointEvent event;           // after-save: the step-N event; during-save: the arming event
  bool event_path_existed = true;  // after-save: the announced path was on disk when the event was read
  std::string created;             // during-save: the name whose creation (or first write) triggered the kill
  std::string trigger_op = "create";  // during-save: what was done to `created`: create, write, truncate, ...
  int64_t last_step = -1;             // the last step line read before the kill
  ChildExit exit;
};

// during-save's trigger in words: "creation of step_4.tmp", "write of latest.ckpt".
std::string describe_save_trigger(const WatchOutcome& w);

// Called with the child's last logged step each time it grows (the drill's progress line).
using StepObserver = std::function<void(int64_t)>;

// Kills `child` (SIGKILL) as soon as the metrics file announces the checkpoint of `step`.
WatchOutcome kill_after_checkpoint(RunningProgram& child, const std::string& metrics,
                                   const std::string& ckpt_dir, int64_t step, double timeout_seconds,
                                   const StepObserver& on_step = nullptr);

// Kills `child` as soon as it starts writing the checkpoint after the one of `armed_after_step`
// (0: the first one): at the first name created or written (a write or truncate: a save in place) in
// `ckpt_dir` (inotify) that is (1) queued after
// the appearance of that checkpoint's announced name, which is the last thing its save does
// there, so no polling delay can hide the next save's first file, and (2) seen once the run has
// logged a step after `armed_after_step` (a `latest` marker written after a save is not the
// next save).
Result<WatchOutcome> kill_during_save(RunningProgram& child, const std::string& metrics,
                                      const std::string& ckpt_dir, int64_t armed_after_step,
                                      double timeout_seconds, const StepObserver& on_step = nullptr);

}  // namespace ckpt
