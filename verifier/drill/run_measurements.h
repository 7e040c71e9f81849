// What the drill measures of any training program from outside, with no help from it: when each
// line of the metrics file arrives (step time, the save stall from a step's line to its checkpoint
// event, the restore time from a relaunch to its first logged step), the resident memory of the
// run's process tree sampled from /proc, checkpoint bytes on disk and bytes per component of the
// checkpoint the drill already reads. The optional contract fields a program may log (`tokens`,
// `peak_memory_bytes`, `data_wait_ms`; verifier/drill/program_contract.h) are used when present
// and labelled as reported by the program. A value that was not measured is JSON null, never 0.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "verifier/process/rss_sampler.h"
#include "verifier/tensors/state_snapshot.h"

namespace ckpt {

constexpr std::chrono::milliseconds kRssSampleInterval{50};
constexpr std::chrono::milliseconds kMetricsPollInterval{5};

// One metrics line, and when the drill saw it.
struct LineArrival {
  double seconds = 0;       // since the run was started
  bool checkpoint = false;  // a checkpoint event; otherwise a step line
  int64_t step = -1;
  std::map<std::string, double> reported;  // tokens, peak_memory_bytes, data_wait_ms when logged
};

// Reads one metrics line seen `seconds` after the start; false for a line that is neither a step
// line nor a checkpoint event. Python's NaN and Infinity do not hide a line's step.
bool parse_line_arrival(const std::string& line, double seconds, LineArrival* out);

struct RunTimeline {
  std::vector<LineArrival> lines;
  RssPeak rss;
};

// Watches one run from the moment it was started until stop(): polls its metrics file every
// kMetricsPollInterval on a thread of its own and samples its process tree's RSS.
class RunWatch {
 public:
  RunWatch(pid_t pid, const std::string& metrics,
           std::chrono::milliseconds rss_interval = kRssSampleInterval);
  ~RunWatch();
  RunWatch(const RunWatch&) = delete;
  RunWatch& operator=(const RunWatch&) = delete;
  // Reads the lines still unread, stops both threads and returns the timeline; later calls return it again.
  RunTimeline stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The figures of one timeline; nullopt where it cannot give them.
struct TimelineFigures {
  std::optional<double>
      first_step_seconds;  // start -> first step line: start-up (and a restore) plus one step
  // Mean time between consecutive step lines, not counting a save between them (the interval
  // runs from the checkpoint event instead of the step line).
  std::optional<double> step_seconds_mean;
  int64_t step_intervals = 0;
  // From a step's line to that step's checkpoint event: how long training stood still to save.
  std::optional<double> save_stall_seconds_mean, save_stall_seconds_max;
  int64_t saves = 0;
  std::optional<double> tokens_per_step_mean;    // reported: mean `tokens` over the steps that log it
  std::optional<double> data_wait_seconds_mean;  // reported: mean `data_wait_ms` / 1000
  std::optional<double> peak_memory_bytes;       // reported: the largest `peak_memory_bytes`
};
TimelineFigures timeline_figures(const RunTimeline& timeline);

// Tensor bytes of a snapshot by component ("model", "optimizer", ...).
std::map<std::string, uint64_t> component_bytes(const StateSnapshot& snapshot);
// Bytes of a file, or of every regular file under a directory; 0 when unreadable.
uint64_t bytes_on_disk(const std::string& path);

struct OutsideInputs {
  RunTimeline reference;                       // the uninterrupted run
  std::vector<RunTimeline> resumed;            // every relaunch from a checkpoint
  std::map<std::string, uint64_t> components;  // of the reference's final checkpoint
  uint64_t checkpoint_bytes = 0;               // that checkpoint on disk
  int ranks = 1;                               // processes per run (the tree holds all of them)
};

// The report's "measurements" for a program drilled from outside: {"memory", "timings",
// "eval_every_steps", "sources"}; every key of memory and timings has a sources entry saying
// measured / reported by the program / derived / assumed / not measured.
nlohmann::json outside_measurements(const OutsideInputs& in);

}  // namespace ckpt
