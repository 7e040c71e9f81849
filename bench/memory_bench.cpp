// Verify's memory must not grow with the checkpoint: hashing streams through a bounded buffer.
// Measured as the peak RSS (ru_maxrss from wait4) of the verify child on a small and an 8x larger
// checkpoint with the same shard count; the difference is the growth.
#include "bench/bench.h"

namespace ckpt::bench {

std::vector<BenchRow> run_memory_bench(const BenchSettings& settings, const BenchCheckpoint& large) {
  const size_t shards = large.shard_paths.size();
  const uint64_t small_bytes = large.bytes / 8;
  const std::string name = "verify peak RSS growth, " + format_mib(static_cast<double>(small_bytes)) +
                           " -> " + format_mib(static_cast<double>(large.bytes)) + " checkpoint";
  const std::string goal = "< 32 MiB";
  if (!has_subcommand(settings.ckptcheck_bin, "verify")) {
    return {unavailable_row(name, goal, "not available",
                            "not available: this ckptcheck has no `verify` subcommand")};
  }
  auto small = write_synthetic_checkpoint(settings.work_dir + "/memory-small", small_bytes, shards, 7);
  if (!small) return {unavailable_row(name, goal, "error", small.status().message())};

  auto measure = [&](const BenchCheckpoint& c) -> Result<int64_t> {
    CKPT_RETURN_IF_ERROR(read_files_once(c.shard_paths));
    CKPT_ASSIGN_OR_RETURN(ChildRun run, run_child({settings.ckptcheck_bin, "verify", c.dir}, false, 600,
                                                  /*own_rss=*/true));
    if (run.exit_code != 0) {
      return Status::io_error("verify " + c.dir + ": exit code " + std::to_string(run.exit_code) + ": " +
                              run.log_tail);
    }
    return run.max_rss_bytes;
  };
  auto small_rss = measure(*small);
  auto large_rss = measure(large);
  (void)remove_tree(small->root);
  if (!small_rss || !large_rss) {
    return {unavailable_row(name, goal, "error",
                            (small_rss ? large_rss.status() : small_rss.status()).message())};
  }
  BenchRow row = peak_rss_growth_row(name, *small_rss, *large_rss);
  row.numbers["small_checkpoint_bytes"] = small->bytes;
  row.numbers["large_checkpoint_bytes"] = large.bytes;
  row.numbers["shards"] = shards;
  row.numbers["source"] =
      "peak RSS of the verify command alone (GNU time %M; else wait4, which includes the bench's own RSS at "
      "fork)";
  return {row};
}

}  // namespace ckpt::bench
