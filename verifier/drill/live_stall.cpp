#include "verifier/drill/live_stall.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/file_stamp.h"

namespace ckpt {

namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double wall_now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 10 ? "%.0f" : "%.2g", s);
  return buf;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

double live_stall_seconds(double asked, std::vector<double> intervals) {
  if (asked >= 0) return asked;
  if (intervals.empty()) return kMinLiveStallSeconds;
  return std::max(kMinLiveStallSeconds, kLiveStallIntervals * median_of(std::move(intervals)));
}

LiveStallWatch::LiveStallWatch(std::string log_path, double asked, int64_t snapshot_step,
                               int64_t snapshot_mtime_ns)
    : path_(std::move(log_path)),
      asked_(asked),
      snapshot_step_(snapshot_step),
      snapshot_mtime_ns_(snapshot_mtime_ns) {}

void LiveStallWatch::observe(int64_t last_step) {
  const double now = steady_now();
  struct stat st {};
  const bool seen = ::stat(path_.c_str(), &st) == 0;
  const uint64_t size = seen ? static_cast<uint64_t>(st.st_size) : 0;
  const int64_t mtime = seen ? nanoseconds_of(st.st_mtim) : 0;
  if (!looked_) {
    looked_ = true;
    size_ = size, mtime_ns_ = mtime;
    // The log changed last at its modification time (never in the future of the drill's clock).
    const double age = seen ? std::max(0.0, wall_now_seconds() - static_cast<double>(mtime) / 1e9) : 0;
    changed_at_ = now - age;
    last_step_ = last_step;
    last_step_at_ = changed_at_;
    // The run's own pace: from its snapshotted checkpoint to its log's last write.
    if (snapshot_mtime_ns_ > 0 && seen && last_step > snapshot_step_ && mtime > snapshot_mtime_ns_)
      intervals_.push_back(static_cast<double>(mtime - snapshot_mtime_ns_) / 1e9 /
                           static_cast<double>(last_step - snapshot_step_));
    return;
  }
  if (size != size_ || mtime != mtime_ns_) {
    size_ = size, mtime_ns_ = mtime;
    changed_at_ = now;
  }
  if (last_step > last_step_) {
    if (last_step_ >= 0)
      intervals_.push_back((now - last_step_at_) / static_cast<double>(last_step - last_step_));
    last_step_ = last_step;
    last_step_at_ = now;
  }
}

double LiveStallWatch::idle_seconds() const {
  return looked_ ? steady_now() - changed_at_ : 0;
}

bool LiveStallWatch::stalled() const {
  const double limit = stall_seconds();
  return looked_ && limit > 0 && idle_seconds() > limit;
}

std::string LiveStallWatch::not_advancing_words(int64_t needed_step) const {
  std::string rule;
  if (asked_ >= 0)
    rule = "--stall-timeout " + seconds_text(asked_);
  else if (intervals_.empty())
    rule = "the minimum: no step interval of the run measured";
  else
    rule = "max(" + seconds_text(kMinLiveStallSeconds) + " s, " + seconds_text(kLiveStallIntervals) +
           " x its median step interval of " + seconds_text(median_of(intervals_)) + " s)";
  std::string when = "never written";
  if (mtime_ns_ > 0) {
    const std::time_t t = static_cast<std::time_t>(mtime_ns_ / 1000000000);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char iso[32];
    std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &utc);
    when = std::string("last written at ") + iso;
  }
  return "its last step is " + std::to_string(last_step_) + ", its log " + when + " (" +
         seconds_text(idle_seconds()) + " s ago), longer than its stall time of " +
         seconds_text(stall_seconds()) + " s (" + rule + "); did it crash or stop? The drill needs step " +
         std::to_string(needed_step) + " (--stall-timeout sets the stall time, 0 waits out --wait-timeout)";
}

}  // namespace ckpt
