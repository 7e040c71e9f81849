// The Python package's rows (`--only python`), through bench/python_baselines.py run by Debian's
// /usr/bin/python3 with PYTHONPATH naming the package this build made (build-release/python):
//   verify from Python (ckptcheck.verify(weights_only=True), timed around the call) against the CLI
//   (`ckptcheck verify --weights-only`, the whole process) on a sealed 1 GiB torch.save file of model
//   weights: the binding adds nothing to the engine;
//   ckptcheck.torch.save against torch.save + fsync of the same 1 GiB state (both by path);
//   ckptcheck.torch.load against torch.load(weights_only=True) of the same file;
//   `import ckptcheck` against a bare interpreter start.
// Where that Python has no torch or the package was not built, every row says "not available".
#include <unistd.h>

#include "bench/bench.h"

namespace ckpt::bench {

namespace {

std::string package_bench_script(const BenchSettings& s) {
  return s.source_dir + "/bench/python_baselines.py";
}

// The Python, with the built package on its path.
std::vector<std::string> package_python(const BenchSettings& s, std::vector<std::string> args) {
  std::vector<std::string> argv = {"env", "PYTHONPATH=" + s.python_package_dir, s.python};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Result<nlohmann::json> run_json(const std::vector<std::string>& argv) {
  CKPT_ASSIGN_OR_RETURN(ChildRun run, run_child(argv, /*capture_stdout=*/true, 1800));
  if (run.exit_code != 0)
    return Status::io_error(argv[2] + " " + argv[3] + ": exit code " + std::to_string(run.exit_code) + ": " +
                            run.log_tail);
  nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
  if (!j.is_object()) return Status::io_error(argv[3] + ": no JSON object: " + run.out.substr(0, 200));
  return j;
}

// ours/baseline as a time ratio (how many times longer ours takes) against a "<= X" goal.
BenchRow slowdown_row(const std::string& name, double goal, double ours, double baseline, uint64_t bytes,
                      nlohmann::json numbers) {
  BenchRow row;
  row.name = name;
  row.goal = "<= " + format_ratio(goal);
  row.ours = format_seconds(ours) + " (" + format_rate(bytes, ours) + ")";
  row.baseline = format_seconds(baseline) + " (" + format_rate(bytes, baseline) + ")";
  // The table's ratio is "times better"; the goal is on the slowdown, its inverse.
  row.ratio = baseline / ours;
  row.met = std::isnan(row.ratio) ? "error" : ours / baseline <= goal ? "yes" : "NO";
  numbers["slowdown"] = ours / baseline;
  row.numbers = std::move(numbers);
  return row;
}

}  // namespace

std::vector<BenchRow> run_python_bench(const BenchSettings& s) {
  const double gib = s.quick ? 1.0 / 16 : 1.0;
  const std::string size = format_mib(gib * 1024 * kMiB);
  const std::string verify_name = "verify from Python vs the CLI, sealed " + size + " torch.save";
  const std::string save_name = "ckptcheck.torch.save vs torch.save + fsync, " + size + " state";
  const std::string load_name = "ckptcheck.torch.load vs torch.load(weights_only=True), " + size;
  const std::string import_name = "import ckptcheck (over a bare python3 start)";
  auto all_unavailable = [&](const std::string& met, const std::string& why) {
    return std::vector<BenchRow>{
        unavailable_row(verify_name, ">= 0.95x", met, why), unavailable_row(save_name, "<= 1.15x", met, why),
        unavailable_row(load_name, "<= 1.50x", met, why), unavailable_row(import_name, "< 100 ms", met, why)};
  };
  auto check = run_child(package_python(s, {"-c", "import torch, ckptcheck"}), false, 120);
  if (!check || check->exit_code != 0) {
    return all_unavailable("not available", "not available: " + s.python +
                                                " cannot import torch and the "
                                                "package in " +
                                                s.python_package_dir);
  }
  const std::string dir = s.work_dir + "/python";
  if (Status made = run_ok({"mkdir", "-p", dir}); !made) return all_unavailable("error", made.message());
  std::vector<BenchRow> rows;

  // verify: the same sealed file, page-cached, from Python and from the CLI.
  const std::string file = dir + "/state.pt";
  Status written = run_ok(package_python(s, {package_bench_script(s), "write", file, std::to_string(gib)}));
  if (written) written = run_ok({s.ckptcheck_bin, "seal", file});
  if (written) written = read_files_once({file});
  if (!written) return all_unavailable("error", written.message());
  auto cli = time_child(s.repetitions, {s.ckptcheck_bin, "verify", "--weights-only", file});
  auto py =
      run_json(package_python(s, {package_bench_script(s), "verify", file, std::to_string(s.repetitions)}));
  if (cli && py) {
    BenchRow row;
    row.name = verify_name;
    row.goal = ">= 0.95x";
    const double ours = (*py)["seconds"].get<double>(), base = cli->timing.best_seconds;
    const uint64_t bytes = (*py)["bytes_hashed"].get<uint64_t>();
    row.ours = format_seconds(ours) + " (" + format_rate(bytes, ours) + ")";
    row.baseline = "CLI " + format_seconds(base) + " (" + format_rate(bytes, base) + ")";
    row.ratio = base / ours;
    row.met = met_at_least(row.ratio, 0.95);
    row.numbers = {{"python_seconds", (*py)["all_seconds"]},
                   {"cli_seconds", cli->timing.all_seconds},
                   {"bytes_hashed", bytes},
                   {"python_measures", "ckptcheck.verify(path) in a running interpreter"},
                   {"cli_measures", "the whole `ckptcheck verify --weights-only PATH` process"},
                   {"ratio", row.ratio}};
    rows.push_back(std::move(row));
  } else {
    rows.push_back(
        unavailable_row(verify_name, ">= 0.95x", "error", (cli ? py.status() : cli.status()).message()));
  }
  (void)remove_tree(dir);
  (void)run_ok({"mkdir", "-p", dir});

  // save and load: one process builds the state once and times both sides of both rows.
  auto sl = run_json(package_python(
      s, {package_bench_script(s), "save-load", dir, std::to_string(gib),
          // Two more than the other rows: the first save of a run is 3-4x slower for both sides (the
          // page cache reclaiming the previous file) and the rest vary by +-40% on this VM's disk.
          std::to_string(s.repetitions + 2)}));
  if (sl) {
    const uint64_t bytes = (*sl)["bytes"].get<uint64_t>();
    rows.push_back(
        slowdown_row(save_name, 1.15, (*sl)["ckptcheck_save"], (*sl)["torch_save_fsync"], bytes,
                     {{"ours_seconds", (*sl)["ckptcheck_save_all"]},
                      {"baseline_seconds", (*sl)["torch_save_fsync_all"]},
                      {"ours_does",
                       "torch.save by name into a temp dir while the file is hashed as it grows, fsync while "
                       "its tensors are hashed, seal from those digests, rename, fsync dir"},
                      {"bytes", bytes}}));
    rows.push_back(
        slowdown_row(load_name, 1.5, (*sl)["ckptcheck_load"], (*sl)["torch_load"], bytes,
                     {{"ours_seconds", (*sl)["ckptcheck_load_all"]},
                      {"baseline_seconds", (*sl)["torch_load_all"]},
                      {"ours_does", "verify (seal hashes, pickle gate), then torch.load(weights_only=True)"},
                      {"bytes", bytes}}));
  } else {
    rows.push_back(unavailable_row(save_name, "<= 1.15x", "error", sl.status().message()));
    rows.push_back(unavailable_row(load_name, "<= 1.50x", "error", sl.status().message()));
  }
  (void)remove_tree(dir);

  auto bare = time_child(s.repetitions + 2, package_python(s, {"-c", "pass"}));
  auto imported = time_child(s.repetitions + 2, package_python(s, {"-c", "import ckptcheck"}));
  // What the first call adds: the native library and the shared libraries it links.
  auto loaded =
      time_child(s.repetitions + 2, package_python(s, {"-c", "import ckptcheck; ckptcheck.__version__"}));
  if (bare && imported && loaded) {
    BenchRow row;
    row.name = import_name;
    row.goal = "< 100 ms";
    const double extra = imported->timing.best_seconds - bare->timing.best_seconds;
    row.ours = format_seconds(extra);
    row.baseline = "python3 -c pass " + format_seconds(bare->timing.best_seconds);
    row.met = extra < 0.1 ? "yes" : "NO";
    row.numbers = {{"import_seconds", imported->timing.all_seconds},
                   {"bare_seconds", bare->timing.all_seconds},
                   {"extra_seconds", extra},
                   {"with_library_seconds", loaded->timing.all_seconds},
                   {"library_load_extra_seconds", loaded->timing.best_seconds - bare->timing.best_seconds}};
    row.ours += " (" + format_seconds(loaded->timing.best_seconds - bare->timing.best_seconds) +
                " with the library the first call loads)";
    rows.push_back(std::move(row));
  } else {
    rows.push_back(unavailable_row(import_name, "< 100 ms", "error",
                                   (!bare       ? bare.status()
                                    : !imported ? imported.status()
                                                : loaded.status())
                                       .message()));
  }
  return rows;
}

}  // namespace ckpt::bench
