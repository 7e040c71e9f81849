#include "verifier/drill/run_measurements.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/json_fields.h"
#include "base/seconds_since.h"
#include "verifier/drill/save_watch.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReportedFields[] = {"tokens", "peak_memory_bytes", "data_wait_ms"};

// Python's json writes NaN and Infinity, which JSON lacks; for timing a line only its step and
// the reported fields matter, so they become null.
std::string without_python_specials(std::string line) {
  for (const char* special : {"-Infinity", "Infinity", "NaN"}) {
    const std::string s = special;
    for (size_t at = line.find(s); at != std::string::npos; at = line.find(s, at + 4))
      line.replace(at, s.size(), "null");
  }
  return line;
}

std::optional<double> mean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

nlohmann::json value_or_null(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

bool parse_line_arrival(const std::string& line, double seconds, LineArrival* out) {
  auto j = parse_json(line, "metrics line");
  if (!j.is_ok()) j = parse_json(without_python_specials(line), "metrics line");
  if (!j.is_ok() || !j->is_object()) return false;
  auto step = j->find("step");
  if (step == j->end() || !step->is_number_integer()) return false;
  LineArrival a;
  a.seconds = seconds;
  a.step = step->get<int64_t>();
  auto event = j->find("event");
  if (event != j->end()) {
    if (!event->is_string() || event->get<std::string>() != "checkpoint") return false;
    a.checkpoint = true;
  } else {
    for (const char* field : kReportedFields) {
      auto v = j->find(field);
      if (v != j->end() && v->is_number() && v->get<double>() >= 0) a.reported[field] = v->get<double>();
    }
  }
  *out = std::move(a);
  return true;
}

struct RunWatch::State {
  State(pid_t pid, const std::string& metrics, std::chrono::milliseconds interval)
      : start(std::chrono::steady_clock::now()), tail(metrics), rss(pid, interval) {}
  std::chrono::steady_clock::time_point start;
  MetricsTail tail;
  RssSampler rss;
  std::mutex mutex;
  RunTimeline timeline;
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::thread thread;

  void poll() {
    CheckpointEvent ignored;
    tail.poll_for_checkpoint(-1, &ignored);
  }
};

RunWatch::RunWatch(pid_t pid, const std::string& metrics, std::chrono::milliseconds rss_interval)
    : state_(std::make_unique<State>(pid, metrics, rss_interval)) {
  State* s = state_.get();
  s->tail.set_line_observer([s](const std::string& line) {
    LineArrival a;
    if (!parse_line_arrival(line, seconds_since(s->start), &a)) return;
    std::lock_guard<std::mutex> lock(s->mutex);
    s->timeline.lines.push_back(std::move(a));
  });
  s->thread = std::thread([s] {
    while (!s->stopping.load()) {
      s->poll();
      std::this_thread::sleep_for(kMetricsPollInterval);
    }
  });
}

RunWatch::~RunWatch() {
  stop();
}

RunTimeline RunWatch::stop() {
  State* s = state_.get();
  if (!s->stopped) {
    s->stopping.store(true);
    if (s->thread.joinable()) s->thread.join();
    s->poll();  // lines written just before the run ended
    s->timeline.rss = s->rss.stop();
    s->stopped = true;
  }
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->timeline;
}

TimelineFigures timeline_figures(const RunTimeline& t) {
  TimelineFigures f;
  std::map<int64_t, double> step_at;  // the first arrival of each step's line
  std::vector<double> intervals, stalls, tokens, waits;
  std::optional<double> previous;  // the last step line or checkpoint event seen, in order
  for (const LineArrival& a : t.lines) {
    if (a.checkpoint) {
      auto it = step_at.find(a.step);
      if (it != step_at.end()) stalls.push_back(std::max(0.0, a.seconds - it->second));
      previous = a.seconds;
      continue;
    }
    if (!f.first_step_seconds) f.first_step_seconds = a.seconds;
    if (previous) intervals.push_back(std::max(0.0, a.seconds - *previous));
    previous = a.seconds;
    step_at.emplace(a.step, a.seconds);
    auto r = a.reported.find("tokens");
    if (r != a.reported.end()) tokens.push_back(r->second);
    r = a.reported.find("data_wait_ms");
    if (r != a.reported.end()) waits.push_back(r->second / 1000.0);
    r = a.reported.find("peak_memory_bytes");
    if (r != a.reported.end()) f.peak_memory_bytes = std::max(f.peak_memory_bytes.value_or(0), r->second);
  }
  f.step_seconds_mean = mean(intervals);
  f.step_intervals = static_cast<int64_t>(intervals.size());
  f.save_stall_seconds_mean = mean(stalls);
  if (!stalls.empty()) f.save_stall_seconds_max = *std::max_element(stalls.begin(), stalls.end());
  f.saves = static_cast<int64_t>(stalls.size());
  f.tokens_per_step_mean = mean(tokens);
  f.data_wait_seconds_mean = mean(waits);
  return f;
}

std::map<std::string, uint64_t> component_bytes(const StateSnapshot& snapshot) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : snapshot.tensors) bytes[t.component] += t.bytes_size;
  return bytes;
}

uint64_t bytes_on_disk(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    const auto n = fs::file_size(path, ec);
    return ec ? 0 : static_cast<uint64_t>(n);
  }
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(path, ec)) {
    std::error_code size_ec;
    if (e.is_regular_file(size_ec)) {
      const auto n = e.file_size(size_ec);
      if (!size_ec) total += static_cast<uint64_t>(n);
    }
  }
  return total;
}

namespace {

constexpr const char* kNoProbe = "";  // what only a probe inside the program could give

// A table of figures, each with where it came from in the shared `sources` ("not measured" when
// there is no figure): a reader of the JSON can tell a measurement from a guess.
struct SourcedTable {
  nlohmann::json& sources;
  nlohmann::json values = nlohmann::json::object();
  void put(const char* key, const std::optional<double>& v, const std::string& source) {
    // Bytes are counts: written as integers in every mode (26603, never 26603.0).
    const std::string name = key;
    const bool bytes = name.size() > 6 && name.compare(name.size() - 6, 6, "_bytes") == 0;
    values[key] = v && bytes ? nlohmann::json(static_cast<int64_t>(std::llround(*v))) : value_or_null(v);
    sources[key] = v ? source : std::string("not measured");
  }
};

// Memory as seen from outside: the reference run's sampled resident set, what the program logged,
// and the final checkpoint's components standing in for parameters, gradients and optimizer state.
nlohmann::json outside_memory(const OutsideInputs& in, const TimelineFigures& ref, nlohmann::json& sources) {
  SourcedTable memory{sources};
  char sampled[160];
  std::snprintf(sampled, sizeof sampled,
                "measured: the reference run's process tree (%d process(es) at most), its resident set "
                "sampled from /proc every %.0f ms (%lld samples); a shorter peak can be missed",
                in.reference.rss.max_processes, in.reference.rss.interval_seconds * 1000,
                static_cast<long long>(in.reference.rss.samples));
  const std::optional<double> rss =
      in.reference.rss.samples > 0 ? std::optional<double>(static_cast<double>(in.reference.rss.peak_bytes))
                                   : std::nullopt;
  memory.put("peak_rss_bytes", rss, sampled);
  const int ranks = std::max(in.ranks, 1);
  memory.put("peak_rss_bytes_per_rank", rss ? std::optional<double>(*rss / ranks) : std::nullopt,
             "derived: peak_rss_bytes / " + std::to_string(ranks) + " rank(s)");
  memory.values["peak_rss_sampling"] = {{"interval_seconds", in.reference.rss.interval_seconds},
                                        {"samples", in.reference.rss.samples},
                                        {"max_processes", in.reference.rss.max_processes},
                                        {"ranks", ranks}};
  memory.put("peak_memory_bytes", ref.peak_memory_bytes,
             "reported by the program: the largest `peak_memory_bytes` it logged (one full step, optimizer "
             "step included)");
  auto component = [&in](const std::string& name) -> std::optional<double> {
    auto it = in.components.find(name);
    return it == in.components.end() ? std::nullopt : std::optional<double>(static_cast<double>(it->second));
  };
  const std::optional<double> params = component("model"), optimizer = component("optimizer");
  memory.put("parameter_bytes", params,
             "measured: tensor bytes of the `model` component of the reference's final checkpoint");
  memory.put("gradient_bytes", params,
             "assumed: one gradient per parameter of the same dtype (= parameter_bytes)");
  memory.put("optimizer_state_bytes", optimizer,
             "measured: tensor bytes of the `optimizer` component of the reference's final checkpoint");
  double other = 0;
  for (const auto& [name, bytes] : in.components)
    if (name != "model" && name != "optimizer") other += static_cast<double>(bytes);
  memory.put("other_state_bytes", in.components.empty() ? std::nullopt : std::optional<double>(other),
             "measured: tensor bytes of every other component (scheduler, scaler, rng, data, ...)");
  memory.values["checkpoint_component_bytes"] = in.components;
  memory.put("activation_bytes_estimate", std::nullopt, kNoProbe);
  memory.put("rss_before_bytes", std::nullopt, kNoProbe);
  memory.put("cuda", std::nullopt, kNoProbe);  // nothing reads a device from outside
  return memory.values;
}

// Timings as seen from outside: the gaps between the runs' logged lines (the log polled every
// kMetricsPollInterval), and what the program itself reported.
nlohmann::json outside_timings(const OutsideInputs& in, const TimelineFigures& ref, nlohmann::json& sources) {
  SourcedTable timings{sources};
  timings.put("step_seconds_mean", ref.step_seconds_mean,
              "measured: mean time between the reference's step lines (" +
                  std::to_string(ref.step_intervals) + " intervals, the file polled every " +
                  std::to_string(kMetricsPollInterval.count()) + " ms), saves excluded");
  timings.put("data_wait_seconds_mean", ref.data_wait_seconds_mean,
              "reported by the program: mean `data_wait_ms`");
  timings.put("forward_backward_seconds_mean", std::nullopt, kNoProbe);
  timings.put("optimizer_seconds_mean", std::nullopt, kNoProbe);
  timings.put("eval_seconds", std::nullopt, kNoProbe);
  timings.put("checkpoint_save_seconds", ref.save_stall_seconds_mean,
              "measured: mean time from a step's line to its checkpoint event in the reference (" +
                  std::to_string(ref.saves) + " save(s), the file polled every " +
                  std::to_string(kMetricsPollInterval.count()) + " ms)");
  timings.put("checkpoint_save_seconds_max", ref.save_stall_seconds_max,
              "measured: the longest of those save stalls");
  const std::optional<double> bytes = in.checkpoint_bytes > 0
                                          ? std::optional<double>(static_cast<double>(in.checkpoint_bytes))
                                          : std::nullopt;
  timings.put("checkpoint_bytes", bytes, "measured: bytes on disk of the reference's final checkpoint");
  std::optional<double> rate;
  if (bytes && ref.save_stall_seconds_mean && *ref.save_stall_seconds_mean > 0)
    rate = *bytes / 1e6 / *ref.save_stall_seconds_mean;
  timings.put("checkpoint_mb_per_second", rate, "derived: checkpoint_bytes / checkpoint_save_seconds");
  std::optional<double> restore;
  for (const auto& r : in.resumed) {
    const auto first = timeline_figures(r).first_step_seconds;
    if (first) restore = std::max(restore.value_or(0), *first);
  }
  timings.put("restore_seconds", restore,
              "measured: from a relaunch to its first logged step (start-up, the load and one step; the "
              "longest of " +
                  std::to_string(in.resumed.size()) + " relaunch(es))");
  timings.put("fresh_start_seconds", ref.first_step_seconds,
              "measured: from the reference's start to its first logged step (start-up and one step)");
  timings.put("verify_seconds", std::nullopt, kNoProbe);
  timings.put("process_start_seconds", std::nullopt, kNoProbe);
  timings.put("model_load_seconds", std::nullopt, kNoProbe);
  std::optional<double> tokens_per_second;
  if (ref.tokens_per_step_mean && ref.step_seconds_mean && *ref.step_seconds_mean > 0)
    tokens_per_second = *ref.tokens_per_step_mean / *ref.step_seconds_mean;
  timings.put("tokens_per_second", tokens_per_second,
              "derived: the program's reported `tokens` per step / the measured step_seconds_mean");
  return timings.values;
}

}  // namespace

nlohmann::json outside_measurements(const OutsideInputs& in) {
  const TimelineFigures ref = timeline_figures(in.reference);
  nlohmann::json sources = nlohmann::json::object();
  nlohmann::json memory = outside_memory(in, ref, sources);
  nlohmann::json timings = outside_timings(in, ref, sources);
  sources["eval_every_steps"] = "not measured";
  return {{"memory", memory}, {"timings", timings}, {"eval_every_steps", nullptr}, {"sources", sources}};
}

}  // namespace ckpt
