// How verify's throughput grows with --jobs and with the checkpoint's size, against the hashing
// limit measured in the same run; and one checkpoint held in a single shard, which only the
// splitting of a shard's payloads across workers keeps from running on one core. Writes the plot.
#include <sys/statvfs.h>

#include <fstream>
#include <sstream>

#include "base/file_io.h"
#include "bench/bench.h"
#include "bench/svg_plot.h"

namespace ckpt::bench {

namespace {

constexpr int kJobs[] = {1, 2, 4, 8};
constexpr size_t kScalingShards = 8;

uint64_t free_bytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

struct Point {
  int jobs;
  Result<ChildTiming> timing;
};

std::string rate_text(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes_per_second / 1e9);
  return buf;
}

}  // namespace

std::vector<BenchRow> run_scaling_bench(const BenchSettings& s, const HashingLimit& limit) {
  std::vector<BenchRow> rows;
  const std::string goal = "reported";
  if (!has_subcommand(s.ckptcheck_bin, "verify")) {
    return {unavailable_row("verify scaling", goal, "not available",
                            "not available: this ckptcheck has no `verify` subcommand")};
  }
  std::vector<uint64_t> sizes = s.quick ? std::vector<uint64_t>{16 * kMiB, 64 * kMiB}
                                        : std::vector<uint64_t>{256 * kMiB, 1024 * kMiB, 4096 * kMiB};
  LinePlot plot;
  plot.title = "ckptcheck verify throughput (" + std::to_string(kScalingShards) + " shards, page-cached)";
  plot.x_label = "--jobs";
  plot.y_label = "GB/s";
  plot.references.push_back(
      {"hashing limit " + rate_text(limit.bytes_per_second) + " GB/s", limit.bytes_per_second / 1e9});
  nlohmann::json table = nlohmann::json::array();

  for (uint64_t size : sizes) {
    const std::string name = "verify scaling, " + format_mib(static_cast<double>(size)) + " (" +
                             std::to_string(kScalingShards) + " shards), GB/s at --jobs 1/2/4/8";
    // The state is held in memory while written, then the files sit in the page cache.
    const uint64_t need_disk = size + size / 2 + 1024 * kMiB, need_memory = 2 * size + 2048 * kMiB;
    if (free_bytes(s.work_dir) < need_disk || available_memory_bytes() < need_memory) {
      rows.push_back(unavailable_row(
          name, goal, "not available",
          "not available: needs " + format_mib(static_cast<double>(need_disk)) + " free in " + s.work_dir +
              " and " + format_mib(static_cast<double>(need_memory)) + " of available memory"));
      continue;
    }
    auto checkpoint = write_synthetic_checkpoint(s.work_dir + "/scaling", size, kScalingShards, 23);
    if (!checkpoint) {
      rows.push_back(unavailable_row(name, goal, "error", checkpoint.status().message()));
      continue;
    }
    std::vector<Point> points;
    Status warm = read_files_once(checkpoint->shard_paths);
    for (int jobs : kJobs) {
      points.push_back({jobs, warm ? time_child(s.repetitions, {s.ckptcheck_bin, "verify", "--jobs",
                                                                std::to_string(jobs), checkpoint->dir})
                                   : Result<ChildTiming>(warm)});
    }
    (void)remove_tree(checkpoint->root);

    BenchRow row;
    row.name = name;
    row.goal = goal;
    row.met = "reported";
    row.baseline = "limit " + rate_text(limit.bytes_per_second) + " GB/s";
    PlotSeries series{format_mib(static_cast<double>(size)), {}};
    double best = 0;
    for (const Point& p : points) {
      nlohmann::json cell = {
          {"checkpoint_bytes", checkpoint->bytes}, {"shards", kScalingShards}, {"jobs", p.jobs}};
      if (!p.timing) {
        row.met = "error";
        row.ours += (row.ours.empty() ? "" : " / ") + std::string("error");
        cell["error"] = p.timing.status().message();
        table.push_back(cell);
        continue;
      }
      const double rate = static_cast<double>(checkpoint->bytes) / p.timing->timing.best_seconds;
      best = std::max(best, rate);
      row.ours += (row.ours.empty() ? "" : " / ") + rate_text(rate);
      series.points.push_back({static_cast<double>(p.jobs), rate / 1e9});
      cell["seconds"] = p.timing->timing.all_seconds;
      cell["cpu_seconds"] = p.timing->cpu_seconds;
      cell["bytes_per_second"] = rate;
      cell["fraction_of_hashing_limit"] = rate / limit.bytes_per_second;
      cell["max_rss_bytes"] = p.timing->max_rss_bytes;
      table.push_back(cell);
    }
    if (row.met == "error" && best == 0) row.ours = points.front().timing.status().message();
    row.ratio = best > 0 ? best / limit.bytes_per_second : kNotMeasured;
    row.numbers = {{"cells", nlohmann::json::array()}, {"limit_bytes_per_second", limit.bytes_per_second}};
    for (const auto& cell : table)
      if (cell["checkpoint_bytes"] == checkpoint->bytes) row.numbers["cells"].push_back(cell);
    plot.series.push_back(std::move(series));
    rows.push_back(std::move(row));
  }

  // One shard holding everything: every core must still be busy (payloads split across workers).
  const uint64_t single = s.quick ? 64 * kMiB : 1024 * kMiB;
  const std::string name =
      "verify " + format_mib(static_cast<double>(single)) + " in ONE shard vs hashing limit";
  auto one = write_synthetic_checkpoint(s.work_dir + "/one-shard", single, 1, 29);
  if (!one) {
    rows.push_back(unavailable_row(name, ">= 0.90x", "error", one.status().message()));
  } else {
    Status warm = read_files_once(one->shard_paths);
    auto timing =
        warm ? time_child(s.repetitions, {s.ckptcheck_bin, "verify", one->dir}) : Result<ChildTiming>(warm);
    (void)remove_tree(one->root);
    BenchRow row;
    row.name = name;
    row.goal = ">= 0.90x";
    row.baseline = "limit " + rate_text(limit.bytes_per_second) + " GB/s";
    if (timing) {
      const double rate = static_cast<double>(one->bytes) / timing->timing.best_seconds;
      row.ours = format_seconds(timing->timing.best_seconds) + " (" + rate_text(rate) + " GB/s)";
      row.ratio = rate / limit.bytes_per_second;
      row.met = met_at_least(row.ratio, 0.9);
      row.numbers = {{"bytes", one->bytes},
                     {"shards", 1},
                     {"ours_seconds", timing->timing.all_seconds},
                     {"ours_cpu_seconds", timing->cpu_seconds},
                     {"max_rss_bytes", timing->max_rss_bytes},
                     {"limit_bytes_per_second", limit.bytes_per_second},
                     {"ratio", row.ratio}};
    } else {
      row.ours = timing.status().message();
      row.met = "error";
    }
    rows.push_back(std::move(row));
  }

  if (!s.plot_path.empty()) {
    if (Status w = write_file_atomically(s.plot_path, render_svg(plot)); !w) {
      std::fprintf(stderr, "ckptcheck_bench: %s\n", w.message().c_str());
    }
  }
  return rows;
}

}  // namespace ckpt::bench
