// Verify throughput: `ckptcheck verify` (a child process, wall time, so start-up and manifest
// parsing count) against the standard tools hashing the same shard files. Files are page-cached
// first, so this measures hashing and I/O paths, not the disk.
#include <algorithm>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {

struct Baseline {
  const char* row;
  const char* tool;
  double goal;
  std::vector<std::string> argv_prefix;
};

std::string with_rate(double seconds, uint64_t bytes) {
  return format_seconds(seconds) + " (" + format_rate(bytes, seconds) + ")";
}

BenchRow limit_row(const std::string& name, const Result<ChildTiming>& ours, uint64_t bytes,
                   const HashingLimit& limit) {
  BenchRow row;
  row.name = name;
  row.goal = ">= 0.90x";
  char text[96];
  std::snprintf(text, sizeof(text), "%.2f GB/s (%zu x %.2f GB/s alone)", limit.bytes_per_second / 1e9,
                limit.threads, limit.single_thread_bytes_per_second / 1e9);
  row.baseline = text;
  row.numbers = {
      {"bytes", bytes},
      {"limit_threads", limit.threads},
      {"limit_bytes_per_second", limit.bytes_per_second},
      {"limit_all_bytes_per_second", limit.all_bytes_per_second},
      {"single_thread_bytes_per_second", limit.single_thread_bytes_per_second},
      {"limit_method",
       "one thread per core, all at once, each SHA-256 (OpenSSL EVP) over a "
       "256 KiB in-cache buffer"},
      {"two_stream_bytes_per_second", limit.two_stream_bytes_per_second},
      {"two_stream_single_thread_bytes_per_second", limit.two_stream_single_thread_bytes_per_second},
      {"sha256_kernel", limit.kernel}};
  if (!ours) {
    row.ours = ours.status().message();
    row.met = "error";
    return row;
  }
  const double rate = static_cast<double>(bytes) / ours->timing.best_seconds;
  row.ours = with_rate(ours->timing.best_seconds, bytes);
  row.ratio = rate / limit.bytes_per_second;
  row.met = met_at_least(row.ratio, 0.9);
  row.numbers["ours_seconds"] = ours->timing.all_seconds;
  row.numbers["ours_cpu_seconds"] = ours->cpu_seconds;
  row.numbers["ours_max_rss_bytes"] = ours->max_rss_bytes;
  row.numbers["ratio"] = row.ratio;
  // Against ckptcheck's own hashing rate (two streams per core): what is left to gain in reading.
  const double of_own_rate = rate / limit.two_stream_bytes_per_second;
  row.numbers["ratio_to_two_stream_rate"] = of_own_rate;
  char own[96];
  std::snprintf(own, sizeof(own), "; %.2f of our %s rate %.2f GB/s", of_own_rate, limit.kernel.c_str(),
                limit.two_stream_bytes_per_second / 1e9);
  row.ours += own;
  // What the machine's load cannot skew much: the CPU time hashing alone would need (one thread
  // alone, in cache, with the two streams verify runs) over the CPU time verify used.
  const double cpu = *std::min_element(ours->cpu_seconds.begin(), ours->cpu_seconds.end());
  const double efficiency =
      static_cast<double>(bytes) / limit.two_stream_single_thread_bytes_per_second / cpu;
  row.numbers["cpu_efficiency"] = efficiency;
  char cpu_text[64];
  std::snprintf(cpu_text, sizeof(cpu_text), "; CPU %.2f s, %.0f%% of it hashing", cpu, 100 * efficiency);
  row.ours += cpu_text;
  return row;
}

}  // namespace

std::vector<BenchRow> run_verify_bench(const BenchSettings& settings, const BenchCheckpoint& checkpoint,
                                       const HashingLimit& limit) {
  const std::string shape =
      std::to_string(checkpoint.shard_paths.size()) + " x " +
      format_mib(static_cast<double>(checkpoint.bytes) / static_cast<double>(checkpoint.shard_paths.size())) +
      " shards";
  const std::vector<Baseline> baselines = {
      {"verify throughput vs sha256sum, ", "sha256sum", 3.0, {"sha256sum"}},
      {"verify throughput vs openssl, ",
       "openssl dgst -sha256 (files in turn)",
       1.6,
       {"openssl", "dgst", "-sha256"}},
  };
  std::vector<BenchRow> rows;
  if (Status warm = read_files_once(checkpoint.shard_paths); !warm) {
    for (const auto& b : baselines)
      rows.push_back(unavailable_row(b.row + shape, ">= x", "error", warm.message()));
    return rows;
  }

  const bool have_verify = has_subcommand(settings.ckptcheck_bin, "verify");
  Result<ChildTiming> ours =
      Status::not_supported("not available: this ckptcheck has no `verify` subcommand");
  if (have_verify)
    ours = time_child(settings.repetitions, {settings.ckptcheck_bin, "verify", checkpoint.dir});
  // Start-up alone (dynamic loading and static initialisers), to tell it apart from hashing.
  auto startup = time_child(settings.repetitions, {settings.ckptcheck_bin, "--help"});

  for (const auto& b : baselines) {
    BenchRow row;
    row.name = b.row + shape;
    char goal[16];
    std::snprintf(goal, sizeof(goal), ">= %.1fx", b.goal);
    row.goal = goal;
    std::vector<std::string> argv = b.argv_prefix;
    argv.insert(argv.end(), checkpoint.shard_paths.begin(), checkpoint.shard_paths.end());
    auto base = time_child(settings.repetitions, argv);
    row.numbers = {{"bytes", checkpoint.bytes},
                   {"files", checkpoint.shard_paths.size()},
                   {"baseline_tool", b.tool},
                   {"page_cached", true},
                   {"repetitions", settings.repetitions}};
    row.baseline = base ? with_rate(base->timing.best_seconds, checkpoint.bytes) : base.status().message();
    if (base) row.numbers["baseline_seconds"] = base->timing.all_seconds;
    if (ours) {
      row.ours = with_rate(ours->timing.best_seconds, checkpoint.bytes);
      row.numbers["ours_seconds"] = ours->timing.all_seconds;
      row.numbers["ours_max_rss_bytes"] = ours->max_rss_bytes;
      if (startup) row.numbers["ckptcheck_help_seconds"] = startup->timing.all_seconds;
      if (startup) row.numbers["ckptcheck_help_max_rss_bytes"] = startup->max_rss_bytes;
    } else {
      row.ours = ours.status().message();
    }
    if (ours && base) {
      row.ratio = base->timing.best_seconds / ours->timing.best_seconds;
      row.met = met_at_least(row.ratio, b.goal);
    } else {
      row.met = have_verify ? "error" : "not available";
    }
    row.numbers["ratio"] = std::isnan(row.ratio) ? nlohmann::json(nullptr) : nlohmann::json(row.ratio);
    rows.push_back(std::move(row));
  }
  const std::string limit_name = "verify throughput vs hashing limit, " + shape;
  if (have_verify) {
    rows.push_back(limit_row(limit_name, ours, checkpoint.bytes, limit));
    // How much of the limit reading page-cached bytes leaves, measured on the same files.
    const std::string read_name = "verify throughput vs pread+SHA-256 of the same files, " + shape;
    auto fed = page_cache_hashing_rate(settings, checkpoint.shard_paths, limit.threads);
    if (!fed || !ours) {
      rows.push_back(
          unavailable_row(read_name, "reported", "error", (fed ? ours.status() : fed.status()).message()));
    } else {
      BenchRow row;
      row.name = read_name;
      row.goal = "reported";
      row.met = "reported";
      row.ours = with_rate(ours->timing.best_seconds, checkpoint.bytes);
      char text[128];
      std::snprintf(text, sizeof(text), "%.2f GB/s (%zu threads; %.2f of the in-cache limit)", *fed / 1e9,
                    limit.threads, *fed / limit.bytes_per_second);
      row.baseline = text;
      row.ratio = static_cast<double>(checkpoint.bytes) / ours->timing.best_seconds / *fed;
      row.numbers = {{"bytes", checkpoint.bytes},
                     {"page_cache_bytes_per_second", *fed},
                     {"fraction_of_in_cache_limit", *fed / limit.bytes_per_second},
                     {"method",
                      "one thread per core, whole shard files handed out in turn, pread into a "
                      "256 KiB buffer then SHA-256 (OpenSSL EVP), no NaN count, no checks"},
                     {"ratio", row.ratio}};
      rows.push_back(std::move(row));
    }
  } else {
    rows.push_back(unavailable_row(limit_name, ">= 0.90x", "not available", ours.status().message()));
  }
  return rows;
}

}  // namespace ckpt::bench
