// What every benchmark of `ckptcheck_bench` shares: its settings, the row it reports, and the
// measuring tools (best-of-N timing, child processes with wait4, page-cache warming).
// Benches are not tests: nothing here asserts a time; rows report what was measured.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt::bench {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr double kNotMeasured = std::nan("");

struct BenchSettings {
  bool quick = false;         // smaller sizes, for a smoke run
  int repetitions = 3;        // every timed number is the best of this many
  std::string work_dir;       // scratch checkpoints; removed at the end
  std::string ckptcheck_bin;  // the CLI whose subcommands are timed as child processes
  std::string source_dir;     // for fixture configs
  // run one group only: verify | scaling | save-load | pytorch | compression | drill | faultfs | distributed
  // | metadata
  std::string only;
  std::string parse_dcp_bin;  // ckptcheck_bench_parse_dcp (bench/children/): the DCP .metadata parse
  std::string plot_path;      // where the scaling plot (SVG) goes; "" = not written
  std::string python = "/usr/bin/python3";  // Debian's, with python3-torch, for the PyTorch rows
  std::string python_package_dir;           // the built `ckptcheck` package's parent (<build>/python)
};

// One line of the table. `ratio` is how many times better ours is than the baseline (for times:
// baseline seconds / our seconds), NaN where there is no baseline to divide by.
struct BenchRow {
  std::string name;
  std::string ours;      // human text, e.g. "0.61 s (3.3 GB/s)"
  std::string baseline;  // human text
  double ratio = kNotMeasured;
  std::string goal;  // ">= 3x", "< 32 MiB", "reported"
  std::string met;   // "yes", "NO", "disk-bound", "reported", "not available", "not built", "error"
  nlohmann::json numbers = nlohmann::json::object();  // every number behind the row, for --out
};

// "yes"/"NO" for a ratio goal; "error" when the ratio is not a number.
std::string met_at_least(double ratio, double goal);

// Memory that must not grow with the input: the growth of a command's peak RSS from a small input
// to a large one, against kMaxPeakRssGrowth. Callers add what the inputs were to `numbers`.
constexpr double kMaxPeakRssGrowth = 32.0 * kMiB;  // the goal's text: "< 32 MiB"
BenchRow peak_rss_growth_row(const std::string& name, int64_t small_rss, int64_t large_rss);

// A row that could not be measured, with the reason instead of numbers.
BenchRow unavailable_row(const std::string& name, const std::string& goal, const std::string& met,
                         const std::string& reason);

// ---- timing ---------------------------------------------------------------------------------
struct Timing {
  double best_seconds = kNotMeasured;
  std::vector<double> all_seconds;
};

// Runs `prepare` (untimed) then `run` (timed) `repetitions` times; stops at the first error.
Result<Timing> best_of(int repetitions, const std::function<Status()>& prepare,
                       const std::function<Status()>& run);

double seconds_since(double start_seconds);
double now_seconds();  // steady clock

std::string format_seconds(double seconds);
std::string format_rate(uint64_t bytes, double seconds);  // "1.23 GB/s" (decimal GB)
std::string format_ratio(double ratio);                   // "3.41x"
std::string format_mib(double bytes);                     // "12.3 MiB"

// ---- child processes --------------------------------------------------------------------------
struct ChildRun {
  int exit_code = -1;  // 128 + signal when killed
  double wall_seconds = 0;
  int64_t max_rss_bytes = 0;       // peak RSS of the child (see run_child)
  bool rss_includes_bench = true;  // false when measured by GNU time around the command alone
  double cpu_seconds = 0;          // user + system time of the child (RUSAGE_CHILDREN before/after)
  std::string out;                 // stdout, when captured
  std::string log_tail;            // the last few hundred bytes of stderr (and of stdout when not captured)
  std::string error_line;          // the first line of that log saying "error:" (a drill says why it
                                   // exited 2 in its first line, before its checks: out of the tail)
};

// fork + execvp + wait4. stdout is captured when `capture_stdout`; the tail of the rest is kept
// in log_tail. The child is SIGKILLed after `timeout_seconds`.
//
// Peak memory: Linux keeps a process's ru_maxrss across execve, so wait4 on a child forked from
// this bench reports at least the bench's own RSS at fork (libtorch alone is ~60 MiB), not the
// command's. With `own_rss`, the command runs under GNU time (/usr/bin/time, itself a few MiB), whose
// %M is the peak of the command alone; without GNU time, wait4's figure is kept and
// `rss_includes_bench` says so. Timed rows leave it off: the wrapper's fork costs ~1 ms.
Result<ChildRun> run_child(const std::vector<std::string>& argv, bool capture_stdout = false,
                           double timeout_seconds = 600, bool own_rss = false);

// Runs a setup step (a fixture writer, `ckptcheck convert`, ...) untimed, up to 30 minutes: an error
// naming the command line, its exit code and the tail of its output unless it exits 0.
Status run_ok(const std::vector<std::string>& argv);

// Best-of-N wall time of a child that must exit 0; also reports the largest ru_maxrss seen.
struct ChildTiming {
  Timing timing;
  int64_t max_rss_bytes = 0;
  bool rss_includes_bench = true;   // see run_child
  int exit_code = 0;                // of the last repetition
  std::vector<double> cpu_seconds;  // user + system of each repetition: unlike wall time, barely
                                    // moved by other processes on a shared machine
};
// `ok_exit_codes`: a verify that reports findings (exit 1) still did its whole job; rows that time
// one say so in their numbers.
Result<ChildTiming> time_child(int repetitions, const std::vector<std::string>& argv,
                               const std::vector<int>& ok_exit_codes = {0}, bool own_rss = false);
// One more run of `argv`, untimed, for the command's own peak RSS (run_child's own_rss).
Result<int64_t> own_peak_rss(const std::vector<std::string>& argv,
                             const std::vector<int>& ok_exit_codes = {0});

// Whether `ckptcheck <subcommand> --help` exits 0, i.e. the subcommand is built in.
bool has_subcommand(const std::string& bin, const std::string& subcommand);

// ---- files ------------------------------------------------------------------------------------
// Reads every file once, so that timed readers find them in the page cache.
Status read_files_once(const std::vector<std::string>& paths);
// fsync of a file written by someone else (torch::save), so its save is as durable as ours.
Status fsync_path(const std::string& path);
Status remove_tree(const std::string& path);

// ---- the hashing limit ------------------------------------------------------------------------
// What SHA-256 alone allows on this machine: one thread per core, all at once, each hashing an
// in-cache buffer through OpenSSL's EVP (base/sha256.h). Verify hashes every byte once, so its
// throughput cannot exceed this; the verify rows are reported as a fraction of it.
struct HashingLimit {
  size_t threads = 0;
  double bytes_per_second = kNotMeasured;                // all threads together, best repetition
  double single_thread_bytes_per_second = kNotMeasured;  // one thread alone, best repetition
  std::vector<double> all_bytes_per_second;
  // ckptcheck's own hashing, two streams per thread (what verify runs), all threads together.
  double two_stream_bytes_per_second = kNotMeasured;
  double two_stream_single_thread_bytes_per_second = kNotMeasured;  // the same, one thread alone
  std::string kernel;  // sha256_kernel_name of the kernel verify used
};
HashingLimit measure_hashing_limit(const BenchSettings& settings);
// The same threads hashing page-cached files instead (pread into a 256 KiB buffer, then SHA-256,
// whole files handed out in turn): what reading from the page cache leaves of the limit, i.e. the
// best any verifier of these files can do. Bytes per second, best of the repetitions.
Result<double> page_cache_hashing_rate(const BenchSettings& settings, const std::vector<std::string>& files,
                                       size_t threads);

// ---- the benchmarks ---------------------------------------------------------------------------
// A real checkpoint written by write_checkpoint, shared by the verify and memory benches.
struct BenchCheckpoint {
  std::string root;
  std::string dir;
  std::vector<std::string> shard_paths;
  uint64_t bytes = 0;
  double write_seconds = 0;
};
Result<BenchCheckpoint> write_synthetic_checkpoint(const std::string& root, uint64_t total_bytes,
                                                   size_t shards, uint64_t seed);

std::vector<BenchRow> run_verify_bench(const BenchSettings& settings, const BenchCheckpoint& checkpoint,
                                       const HashingLimit& limit);
// verify throughput at --jobs 1, 2, 4, 8 x checkpoint sizes, and one huge shard; writes the plot.
std::vector<BenchRow> run_scaling_bench(const BenchSettings& settings, const HashingLimit& limit);
// inspect --stats against torch.load + statistics in Python; verify of DCP and sealed torch.save.
std::vector<BenchRow> run_pytorch_bench(const BenchSettings& settings);
// ckptcheck.verify against the CLI, ckptcheck.torch.save/load against torch's, import time.
std::vector<BenchRow> run_python_bench(const BenchSettings& settings);
std::vector<BenchRow> run_memory_bench(const BenchSettings& settings, const BenchCheckpoint& large);
std::vector<BenchRow> run_save_load_bench(const BenchSettings& settings);
std::vector<BenchRow> run_compression_bench(const BenchSettings& settings);
std::vector<BenchRow> run_drill_bench(const BenchSettings& settings);
// torch.save + fsync through ckptcheck-faultfs against the same beside it; the drill's cost per storage
// fault.
std::vector<BenchRow> run_faultfs_bench(const BenchSettings& settings);
// verify --distributed: the split's balance at 8 and 64 tasks, 1 vs 2 tasks, the model's inputs.
std::vector<BenchRow> run_distributed_bench(const BenchSettings& settings);
// Checkpoints of 320k and 1M chunks (verify --quick, verify, inspect, diff, convert, the drill's
// comparison) and DCP .metadata of 256k and 1M chunks against pickle.load (bench/metadata_bench.cpp).
std::vector<BenchRow> run_metadata_bench(const BenchSettings& settings, const HashingLimit& limit);

}  // namespace ckpt::bench
