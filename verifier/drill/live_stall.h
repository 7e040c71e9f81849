// Whether a live run is still advancing, for `drill --live` while it waits for step N+K: a run that
// crashed or stopped leaves its log unchanged, and the drill says so instead of waiting out
// --wait-timeout. The rule (docs/drill.md): the run is not advancing when its log (size or
// modification time) has not changed for the stall time, which is --stall-timeout when given, else
// max(60 s, 10 x the run's median step interval). The intervals come from the run itself: the time
// between its snapshotted checkpoint (its files' modification time) and its log's last write, over
// the steps between them, and every advance of the log the drill watches. The clock of the log
// starts at its modification time, so a run dead for hours is named at the first look.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckpt {

constexpr double kMinLiveStallSeconds = 60;
constexpr double kLiveStallIntervals = 10;

// The stall time: `asked` when >= 0 (0: never stalls), else max(60, 10 x median(intervals)); 60 with
// no interval measured.
double live_stall_seconds(double asked, std::vector<double> step_intervals);

class LiveStallWatch {
 public:
  // `asked`: --stall-timeout (-1: the rule). `snapshot_step`, `snapshot_mtime_ns`: the snapshotted
  // checkpoint (0 ns: unknown).
  LiveStallWatch(std::string log_path, double asked, int64_t snapshot_step, int64_t snapshot_mtime_ns);

  // One look at the log, with the last step read from it so far (-1: none).
  void observe(int64_t last_step);
  // True once the log has not changed for stall_seconds().
  bool stalled() const;
  double stall_seconds() const { return live_stall_seconds(asked_, intervals_); }
  // Seconds since the log last changed (by its modification time, or the drill's look).
  double idle_seconds() const;
  // Why the run is taken for stopped: "its last step is 24, its log last written at
  // 2025-01-01T03:00:00Z (612 s ago), longer than its stall time of 60 s (max(60 s, 10 x its median
  // step interval of 0.05 s)); did it crash or stop? The drill needs step 28 (...)".
  std::string not_advancing_words(int64_t needed_step) const;

 private:
  std::string path_;
  double asked_;
  int64_t snapshot_step_, snapshot_mtime_ns_;
  bool looked_ = false;
  uint64_t size_ = 0;
  int64_t mtime_ns_ = 0;
  double changed_at_ = 0;  // seconds on the drill's steady clock when the log last changed
  int64_t last_step_ = -1;
  double last_step_at_ = 0;  // steady seconds when last_step_ was logged
  std::vector<double> intervals_;
};

}  // namespace ckpt
