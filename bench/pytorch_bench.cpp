// Rows on files written by Debian's PyTorch (/usr/bin/python3, python3-torch), through
// bench/torch_baselines.py: `inspect --stats` of a torch.save file against torch.load plus the
// same statistics in Python, and `verify` of a DCP directory and of a sealed torch.save file
// against native `verify` of the same tensors (converted by `ckptcheck convert`). Where that Python
// has no torch, every row says "not available".
#include <filesystem>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {

constexpr int64_t kTensorBytes = int64_t{4096} * 4096 * 4;  // one randn(4096, 4096) F32

struct Files {
  std::string torch_save;  // torch.save of the state
  std::string dcp;         // the same state as a PyTorch 1.13 DCP directory
  std::string native;      // the same tensors as a native checkpoint (ckptcheck convert)
  uint64_t bytes = 0;      // tensor bytes
};

std::string script(const BenchSettings& s) {
  return s.source_dir + "/bench/torch_baselines.py";
}

Result<Files> write_files(const BenchSettings& s, const std::string& dir, int tensors) {
  CKPT_RETURN_IF_ERROR(remove_tree(dir));
  CKPT_RETURN_IF_ERROR(run_ok({"mkdir", "-p", dir}));
  Files f{dir + "/state.pt", dir + "/dcp", dir + "/native", static_cast<uint64_t>(tensors * kTensorBytes)};
  const std::string n = std::to_string(tensors);
  CKPT_RETURN_IF_ERROR(run_ok({s.python, script(s), "write-torch-save", f.torch_save, n}));
  CKPT_RETURN_IF_ERROR(run_ok({s.python, script(s), "write-dcp", f.dcp, n}));
  CKPT_RETURN_IF_ERROR(
      run_ok({s.ckptcheck_bin, "convert", f.torch_save, f.native, "--format", "native", "--shards", "8"}));
  CKPT_RETURN_IF_ERROR(run_ok({s.ckptcheck_bin, "seal", f.torch_save}));
  return f;
}

// Every regular file under the directories, for warming the page cache.
std::vector<std::string> files_under(const std::vector<std::string>& dirs) {
  std::vector<std::string> files;
  for (const auto& dir : dirs) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec)) files.push_back(it->path().string());
    }
  }
  return files;
}

std::string seconds_and_peak(const ChildTiming& t) {
  return format_seconds(t.timing.best_seconds) + ", peak " + format_mib(static_cast<double>(t.max_rss_bytes));
}

nlohmann::json child_numbers(const ChildTiming& t) {
  return {
      {"seconds", t.timing.all_seconds},
      {"max_rss_bytes", t.max_rss_bytes},
      {"max_rss_source", t.rss_includes_bench ? "wait4 (includes the bench's RSS at fork)" : "GNU time %M"},
      {"exit_code", t.exit_code}};
}

// verify of `subject` against verify of the native checkpoint holding the same tensors. verify
// exits 1 when it finds something to report (a weights-only state lacks optimizer state); it has
// still read and hashed everything, so 0 and 1 both count, and the exit code is in the numbers.
BenchRow verify_row(const BenchSettings& s, const std::string& name, const std::vector<std::string>& subject,
                    const Files& f) {
  BenchRow row;
  row.name = name;
  row.goal = ">= 0.80x";
  std::vector<std::string> ours_argv = {s.ckptcheck_bin, "verify"};
  ours_argv.insert(ours_argv.end(), subject.begin(), subject.end());
  auto ours = time_child(s.repetitions, ours_argv, {0, 1}, /*own_rss=*/true);
  auto native = time_child(s.repetitions, {s.ckptcheck_bin, "verify", f.native}, {0, 1}, /*own_rss=*/true);
  if (!ours || !native) {
    return unavailable_row(name, row.goal, "error", (ours ? native.status() : ours.status()).message());
  }
  row.ours = format_seconds(ours->timing.best_seconds) + " (" +
             format_rate(f.bytes, ours->timing.best_seconds) + ", peak " +
             format_mib(static_cast<double>(ours->max_rss_bytes)) + ")";
  row.baseline = "native " + format_seconds(native->timing.best_seconds) + " (" +
                 format_rate(f.bytes, native->timing.best_seconds) + ")";
  row.ratio = native->timing.best_seconds / ours->timing.best_seconds;
  row.met = met_at_least(row.ratio, 0.8);
  row.numbers = {
      {"tensor_bytes", f.bytes},
      {"ours", child_numbers(*ours)},
      {"native", child_numbers(*native)},
      {"native_layout", "ckptcheck convert --format native --shards 8 of the same torch.save file"},
      {"ratio", row.ratio}};
  return row;
}

// Peak RSS of verify on the small and the large file set: memory must not grow with the size.
BenchRow memory_row(const BenchSettings& s, const std::string& name, const std::vector<std::string>& small,
                    const std::vector<std::string>& large, uint64_t small_bytes, uint64_t large_bytes) {
  auto measure = [&](const std::vector<std::string>& subject) -> Result<int64_t> {
    std::vector<std::string> argv = {s.ckptcheck_bin, "verify"};
    argv.insert(argv.end(), subject.begin(), subject.end());
    return own_peak_rss(argv, {0, 1});
  };
  auto a = measure(small);
  auto b = measure(large);
  if (!a || !b) return unavailable_row(name, "< 32 MiB", "error", (a ? b.status() : a.status()).message());
  const double growth = static_cast<double>(*b - *a);
  BenchRow row;
  row.name = name;
  row.goal = "< 32 MiB";
  row.ours =
      (growth >= 0 ? "+" : "") + format_mib(growth) + " (peak " + format_mib(static_cast<double>(*b)) + ")";
  row.baseline =
      "peak " + format_mib(static_cast<double>(*a)) + " at " + format_mib(static_cast<double>(small_bytes));
  row.met = growth < 32.0 * kMiB ? "yes" : "NO";
  row.numbers = {
      {"small_bytes", small_bytes}, {"large_bytes", large_bytes},
      {"small_max_rss_bytes", *a},  {"large_max_rss_bytes", *b},
      {"growth_bytes", growth},     {"source", "peak RSS of the verify command alone (GNU time %M)"}};
  return row;
}

}  // namespace

std::vector<BenchRow> run_pytorch_bench(const BenchSettings& s) {
  const int large_tensors = s.quick ? 2 : 16, small_tensors = s.quick ? 1 : 4;
  const std::string size = format_mib(static_cast<double>(large_tensors * kTensorBytes));
  const std::string stats_name = "inspect --stats " + size + " torch.save (" + std::to_string(large_tensors) +
                                 " x 4096^2 F32) vs python torch.load + stats + sha256";
  const std::string dcp_name = "verify " + size + " DCP (torch 1.13) vs native verify, same tensors";
  const std::string sealed_name = "verify " + size + " sealed torch.save vs native verify, same tensors";
  const std::string dcp_memory = "verify DCP peak RSS growth, " +
                                 format_mib(static_cast<double>(small_tensors * kTensorBytes)) + " -> " +
                                 size;
  const std::string sealed_memory = "verify sealed torch.save peak RSS growth, " +
                                    format_mib(static_cast<double>(small_tensors * kTensorBytes)) + " -> " +
                                    size;
  auto all_unavailable = [&](const std::string& met, const std::string& why) {
    return std::vector<BenchRow>{
        unavailable_row(stats_name, ">= 5x", met, why), unavailable_row(dcp_name, ">= 0.80x", met, why),
        unavailable_row(sealed_name, ">= 0.80x", met, why), unavailable_row(dcp_memory, "< 32 MiB", met, why),
        unavailable_row(sealed_memory, "< 32 MiB", met, why)};
  };
  auto check = run_child({s.python, script(s), "check"}, false, 120);
  if (!check || check->exit_code != 0) {
    return all_unavailable("not available", "not available: " + s.python + " cannot import torch");
  }
  for (const char* sub : {"inspect", "verify", "seal", "convert"}) {
    if (!has_subcommand(s.ckptcheck_bin, sub)) {
      return all_unavailable("not available",
                             std::string("not available: this ckptcheck has no `") + sub + "` subcommand");
    }
  }
  std::fprintf(stderr, "writing the PyTorch files (torch.save, DCP, native, seal) with %s...\n",
               s.python.c_str());
  auto large = write_files(s, s.work_dir + "/pytorch-large", large_tensors);
  auto small = write_files(s, s.work_dir + "/pytorch-small", small_tensors);
  if (!large || !small) return all_unavailable("error", (large ? small.status() : large.status()).message());
  Status warm = read_files_once({large->torch_save, small->torch_save});
  if (!warm) return all_unavailable("error", warm.message());

  std::vector<BenchRow> rows;
  {
    BenchRow row;
    row.name = stats_name;
    row.goal = ">= 5x";
    // Both under GNU time for their own peak memory (~1 ms each on runs of seconds).
    auto ours =
        time_child(s.repetitions, {s.ckptcheck_bin, "inspect", "--stats", large->torch_save}, {0}, true);
    auto python = time_child(s.repetitions, {s.python, script(s), "stats", large->torch_save}, {0}, true);
    if (ours && python) {
      row.ours = seconds_and_peak(*ours);
      row.baseline = seconds_and_peak(*python);
      row.ratio = python->timing.best_seconds / ours->timing.best_seconds;
      row.met = met_at_least(row.ratio, 5.0);
      row.numbers = {{"file_bytes", large->bytes},
                     {"ours", child_numbers(*ours)},
                     {"python", child_numbers(*python)},
                     {"python_does",
                      "torch.load(map_location=cpu); per tensor min, max, mean, std, NaN and Inf "
                      "counts, sha256 of its bytes"},
                     {"memory_ratio", static_cast<double>(python->max_rss_bytes) /
                                          static_cast<double>(std::max<int64_t>(1, ours->max_rss_bytes))},
                     {"ratio", row.ratio}};
    } else {
      row = unavailable_row(stats_name, ">= 5x", "error", (ours ? python.status() : ours.status()).message());
    }
    rows.push_back(std::move(row));
  }
  Status warm_trees = read_files_once(files_under({large->dcp, large->native, small->dcp, small->native}));
  if (!warm_trees) return all_unavailable("error", warm_trees.message());
  rows.push_back(verify_row(s, dcp_name, {"--weights-only", large->dcp}, *large));
  rows.push_back(verify_row(s, sealed_name, {large->torch_save}, *large));
  rows.push_back(memory_row(s, dcp_memory, {"--weights-only", small->dcp}, {"--weights-only", large->dcp},
                            small->bytes, large->bytes));
  rows.push_back(
      memory_row(s, sealed_memory, {small->torch_save}, {large->torch_save}, small->bytes, large->bytes));
  (void)remove_tree(s.work_dir + "/pytorch-large");
  (void)remove_tree(s.work_dir + "/pytorch-small");
  return rows;
}

}  // namespace ckpt::bench
