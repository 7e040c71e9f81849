// ckptcheck_bench: every performance number the project claims, measured in one run against a
// baseline measured in the same run on the same files. Prints a table and writes all numbers and
// the machine to --out. Method: bench/README.md.
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/file_io.h"
#include "base/huge_pages.h"
#include "bench/bench.h"

namespace ckpt::bench {

namespace {

std::string first_line_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      size_t begin = line.find_first_not_of(" \t", colon + 1);
      return begin == std::string::npos ? "" : line.substr(begin);
    }
  }
  return "";
}

nlohmann::json machine_json() {
  struct utsname u {};
  ::uname(&u);
  const std::string flags = first_line_value("/proc/cpuinfo", "flags");
  auto has_flag = [&](const std::string& f) {
    return (" " + flags + " ").find(" " + f + " ") != std::string::npos;
  };
  long long mem_kib = 0;
  std::istringstream(first_line_value("/proc/meminfo", "MemTotal")) >> mem_kib;
  return {{"cpu_model", first_line_value("/proc/cpuinfo", "model name")},
          {"cores", std::thread::hardware_concurrency()},
          {"ram_bytes", mem_kib * 1024},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"sha_ni", has_flag("sha_ni")},
          {"avx2", has_flag("avx2")}};
}

// "0.52 0.80 1.10": the 1, 5 and 15 minute load averages.
std::string read_loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

nlohmann::json row_json(const BenchRow& r) {
  return {{"row", r.name},
          {"ours", r.ours},
          {"baseline", r.baseline},
          {"ratio", std::isnan(r.ratio) ? nlohmann::json(nullptr) : nlohmann::json(r.ratio)},
          {"goal", r.goal},
          {"met", r.met},
          {"numbers", r.numbers}};
}

void print_table(const std::vector<BenchRow>& rows) {
  std::printf("| row | ours | baseline | ratio | goal | met? |\n|---|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %s |\n", r.name.c_str(), r.ours.c_str(), r.baseline.c_str(),
                format_ratio(r.ratio).c_str(), r.goal.c_str(), r.met.c_str());
  }
}

void append(std::vector<BenchRow>& all, std::vector<BenchRow> more) {
  for (auto& r : more) {
    std::fprintf(stderr, "  %-70s %s\n", r.name.c_str(), r.met.c_str());
    all.push_back(std::move(r));
  }
}

std::vector<BenchRow> run_all(const BenchSettings& s) {
  std::vector<BenchRow> rows;
  auto wanted = [&](const char* group) { return s.only.empty() || s.only == group; };
  HashingLimit limit;
  if (wanted("verify") || wanted("scaling") || wanted("metadata")) {
    // Measured first, in the same run, on an idle bench: what every verify row is compared with.
    limit = measure_hashing_limit(s);
    std::fprintf(stderr,
                 "hashing limit (OpenSSL): %zu threads, %.2f GB/s together (%.2f GB/s one alone); ours, two "
                 "streams per thread (%s): %.2f GB/s together\n",
                 limit.threads, limit.bytes_per_second / 1e9, limit.single_thread_bytes_per_second / 1e9,
                 limit.kernel.c_str(), limit.two_stream_bytes_per_second / 1e9);
  }
  if (wanted("verify")) {
    // The verify rows need 8 x 256 MiB shards of a real checkpoint; the memory row reuses it.
    const uint64_t verify_bytes = s.quick ? 64 * kMiB : 2048 * kMiB;
    std::fprintf(stderr, "writing the %s verify checkpoint...\n",
                 format_mib(static_cast<double>(verify_bytes)).c_str());
    auto checkpoint = write_synthetic_checkpoint(s.work_dir + "/verify", verify_bytes, 8, 3);
    if (checkpoint) {
      append(rows, run_verify_bench(s, *checkpoint, limit));
      append(rows, run_memory_bench(s, *checkpoint));
      (void)remove_tree(checkpoint->root);
    } else {
      append(rows, {unavailable_row("verify throughput", ">= 3x", "error", checkpoint.status().message())});
    }
  }
  if (wanted("scaling")) append(rows, run_scaling_bench(s, limit));
  if (wanted("save-load")) append(rows, run_save_load_bench(s));
  if (wanted("pytorch")) append(rows, run_pytorch_bench(s));
  if (wanted("python")) append(rows, run_python_bench(s));
  if (wanted("compression")) append(rows, run_compression_bench(s));
  if (wanted("drill")) append(rows, run_drill_bench(s));
  if (wanted("faultfs")) append(rows, run_faultfs_bench(s));
  if (wanted("distributed")) append(rows, run_distributed_bench(s));
  if (wanted("metadata")) append(rows, run_metadata_bench(s, limit));
  return rows;
}

}  // namespace

int bench_main(int argc, char** argv) {
  CLI::App app{"ckptcheck_bench: the measured performance of ckptcheck against same-run baselines"};
  BenchSettings s;
  std::string out_path;
  s.ckptcheck_bin = CKPTCHECK_BIN;
  s.python_package_dir = CKPTCHECK_PYTHON_PACKAGE_DIR;
  s.source_dir = CKPTCHECK_SOURCE_DIR;
  s.work_dir = "/tmp/ckptcheck-bench-" + std::to_string(::getpid());
  app.add_option("--out", out_path, "write every number and the machine here as JSON");
  app.add_flag("--quick", s.quick, "small sizes: a smoke run of every row, numbers not meaningful");
  app.add_option("--work-dir", s.work_dir, "scratch directory (created, removed at the end)");
  app.add_option("--ckptcheck", s.ckptcheck_bin, "the ckptcheck binary whose verify and drill are timed");
  app.add_option("--only", s.only, "run one group of rows")
      ->check(CLI::IsMember({"verify", "scaling", "save-load", "pytorch", "python", "compression", "drill",
                             "faultfs", "distributed", "metadata"}));
  app.add_option("--python", s.python, "the Python with torch for the PyTorch rows (Debian's python3-torch)");
  app.add_option(
      "--python-package-dir", s.python_package_dir,
      "the directory holding the built `ckptcheck` Python package (default: this build's python/)");
  app.add_option("--repetitions", s.repetitions, "timed repetitions per number; the best is reported")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  s.parse_dcp_bin = CKPTCHECK_BENCH_PARSE_DCP_BIN;

  if (Status made = make_directory(s.work_dir); !made) {
    std::fprintf(stderr, "ckptcheck_bench: %s\n", made.message().c_str());
    return 2;
  }
  // The scaling plot goes beside the JSON.
  if (!out_path.empty()) {
    const size_t slash = out_path.rfind('/');
    s.plot_path = (slash == std::string::npos ? std::string() : out_path.substr(0, slash + 1)) +
                  "bench-verify-scaling.svg";
    if (slash != std::string::npos) (void)make_directory(out_path.substr(0, slash));
  }
  // The bench machine may be shared: the load before and after goes with the numbers.
  const std::string load_before = read_loadavg();
  const double start = now_seconds();
  const std::vector<BenchRow> rows = run_all(s);
  const double total = seconds_since(start);
  const std::string load_after = read_loadavg();
  (void)remove_tree(s.work_dir);

  const nlohmann::json machine = machine_json();
  std::printf(
      "\nckptcheck_bench%s on %s, %d cores, %s RAM, %s; best of %d, page-cached, %.0f s total; "
      "load average %s before, %s after\n\n",
      s.quick ? " --quick" : "", machine["cpu_model"].get<std::string>().c_str(), machine["cores"].get<int>(),
      format_mib(machine["ram_bytes"].get<double>()).c_str(), machine["kernel"].get<std::string>().c_str(),
      s.repetitions, total, load_before.c_str(), load_after.c_str());
  print_table(rows);

  if (!out_path.empty()) {
    nlohmann::json report = {{"machine", machine},
                             {"settings",
                              {{"quick", s.quick},
                               {"repetitions", s.repetitions},
                               {"statistic", "best"},
                               {"page_cached", true},
                               {"ckptcheck", s.ckptcheck_bin}}},
                             {"total_seconds", total},
                             {"loadavg_before", load_before},
                             {"loadavg_after", load_after},
                             {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) report["rows"].push_back(row_json(r));
    const size_t slash = out_path.rfind('/');
    if (slash != std::string::npos) (void)make_directory(out_path.substr(0, slash));
    if (Status w = write_file_atomically(out_path, report.dump(2) + "\n"); !w) {
      std::fprintf(stderr, "ckptcheck_bench: %s\n", w.message().c_str());
      return 2;
    }
    std::printf("\nwrote %s\n", out_path.c_str());
    if (s.only.empty() || s.only == "scaling") std::printf("wrote %s\n", s.plot_path.c_str());
  }
  for (const auto& r : rows) {
    if (r.met == "error") return 1;
  }
  return 0;
}

}  // namespace ckpt::bench

int main(int argc, char** argv) {
  // As in `ckptcheck` (verifier/cli/main.cpp): the rows run in this process (the drill's final-state
  // comparison) then see the heap the commands have.
  ckpt::use_huge_page_heap();
  return ckpt::bench::bench_main(argc, argv);
}
