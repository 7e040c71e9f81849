// Verify throughput: `ckptcheck verify` (a child process, wall time, so start-up and manifest
// parsing count) against the standard tools hashing the same shard files. Files are page-cached
// first, so this measures hashing and I/O paths, not the disk.
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

}  // namespace

std::vector<BenchRow> run_verify_bench(const BenchSettings& settings, const BenchCheckpoint& checkpoint) {
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
  return rows;
}

}  // namespace ckpt::bench
