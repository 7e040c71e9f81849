// The fault file system's rows (`--only faultfs`, issue 67):
//   a 1 GiB torch.save + fsync through ckptcheck-faultfs against the same into a directory beside its
//   backing one (same file system, no FUSE), in one Python process, alternating, best of N
//   (bench/faultfs_baselines.py): what a program pays for writing through the drill's mount;
//   the drill's added cost per storage fault: `ckptcheck drill` of the torch-free
//   tests/data/programs/save_protocols.py (--protocol durable, which passes every fault) with
//   `--faults F` against the same drill without it; each fault adds a subject, the mount, the fault
//   and a relaunch, and a program that starts in milliseconds leaves the drill's own part visible.
#include <unistd.h>

#include "base/file_io.h"
#include "bench/bench.h"

namespace ckpt::bench {

namespace {

std::string faultfs_beside(const std::string& ckptcheck_bin) {
  const size_t slash = ckptcheck_bin.rfind('/');
  return (slash == std::string::npos ? std::string() : ckptcheck_bin.substr(0, slash + 1)) +
         "ckptcheck-faultfs";
}

BenchRow save_row(const BenchSettings& s, const std::string& faultfs) {
  const double gib = s.quick ? 1.0 / 16 : 1.0;
  const std::string name =
      "torch.save + fsync through ckptcheck-faultfs vs the same beside its backing dir, " +
      format_mib(gib * 1024 * kMiB);
  const std::string goal = ">= 0.50x";
  auto check = run_child({s.python, "-c", "import torch"}, false, 120);
  if (!check || check->exit_code != 0)
    return unavailable_row(name, goal, "not available",
                           "not available: " + s.python + " cannot import torch");
  const std::string work = s.work_dir + "/faultfs-save";
  auto run = run_child({s.python, s.source_dir + "/bench/faultfs_baselines.py", "save", faultfs, work,
                        std::to_string(gib), std::to_string(s.repetitions + 2)},
                       /*capture_stdout=*/true, 1800);
  (void)remove_tree(work);
  if (!run) return unavailable_row(name, goal, "error", run.status().message());
  const nlohmann::json j = nlohmann::json::parse(run->out, nullptr, false);
  if (run->exit_code != 0 || !j.is_object())
    return unavailable_row(
        name, goal, "error",
        "faultfs_baselines.py exited " + std::to_string(run->exit_code) + ": " + run->log_tail);
  const uint64_t bytes = j["bytes"].get<uint64_t>();
  const double ours = j["faultfs_seconds"].get<double>(), base = j["plain_seconds"].get<double>();
  BenchRow row;
  row.name = name;
  row.goal = goal;
  row.ours = format_seconds(ours) + " (" + format_rate(bytes, ours) + ")";
  row.baseline = format_seconds(base) + " (" + format_rate(bytes, base) + ")";
  row.ratio = base / ours;
  row.met = met_at_least(row.ratio, 0.5);
  row.numbers = {
      {"faultfs_seconds", j["faultfs_all"]},
      {"plain_seconds", j["plain_all"]},
      {"bytes", bytes},
      {"ours_does", "torch.save(state, path) then fsync(path), path on the ckptcheck-faultfs mount"},
      {"baseline_does", "the same into a directory beside the backing one, same file system"}};
  return row;
}

BenchRow drill_cost_row(const BenchSettings& s) {
  const std::string name =
      "drill's added cost per storage fault (save_protocols.py --protocol durable, N=4 K=2)";
  const std::string goal = "reported";
  const std::string program = s.source_dir + "/tests/data/programs/save_protocols.py";
  const std::string work = s.work_dir + "/faultfs-drill";
  if (Status made = make_directory(work); !made) return unavailable_row(name, goal, "error", made.message());
  // power-loss-mid-save needs a save slow enough for the kill to land inside it: it and its own
  // baseline drill run with --save-sleep 0.3.
  auto drill = [&](const std::string& faults, bool slow_save) {
    std::vector<std::string> argv = {s.ckptcheck_bin,  "drill", "--save-at",  "4",
                                     "--resume-steps", "2",     "--work-dir", work};
    if (!faults.empty()) argv.insert(argv.end(), {"--faults", faults});
    argv.insert(argv.end(), {"--", "/usr/bin/python3", program, "--protocol", "durable"});
    if (slow_save) argv.insert(argv.end(), {"--save-sleep", "0.3"});
    return time_child(s.repetitions, argv);
  };
  auto base = drill("", false);
  auto slow_base = drill("", true);
  if (!base || !slow_base)
    return unavailable_row(name, goal, "error", (!base ? base.status() : slow_base.status()).message());
  BenchRow row;
  row.name = name;
  row.goal = goal;
  row.met = "reported";
  row.baseline = "the drill without faults " + format_seconds(base->timing.best_seconds) + " (" +
                 format_seconds(slow_base->timing.best_seconds) + " with --save-sleep 0.3)";
  row.numbers = {{"base_seconds", base->timing.all_seconds},
                 {"slow_save_base_seconds", slow_base->timing.all_seconds}};
  for (const char* fault : {"power-loss", "power-loss-mid-save", "disk-full", "read-error"}) {
    const bool slow = std::string(fault) == "power-loss-mid-save";
    auto with = drill(fault, slow);
    if (!with) {  // said in the row; the other faults are still measured
      row.ours += (row.ours.empty() ? "" : ", ") + std::string(fault) + " error";
      row.numbers[fault] = {{"error", with.status().message()}};
      row.met = "error";
      continue;
    }
    const double added = with->timing.best_seconds - (slow ? slow_base : base)->timing.best_seconds;
    row.ours += (row.ours.empty() ? "" : ", ") + std::string(fault) + " +" + format_seconds(added);
    row.numbers[fault] = {{"drill_seconds", with->timing.all_seconds}, {"added_seconds", added}};
  }
  // A drill that errored keeps its work dir (its runs' logs; the error names it): so does the bench.
  if (row.met == "error")
    row.numbers["work_dir_kept"] = work;
  else
    (void)remove_tree(work);
  return row;
}

}  // namespace

std::vector<BenchRow> run_faultfs_bench(const BenchSettings& s) {
  const std::string faultfs = faultfs_beside(s.ckptcheck_bin);
  if (::access(faultfs.c_str(), X_OK) != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
    const std::string why = "not available: needs " + faultfs + " and /dev/fuse";
    return {unavailable_row("torch.save + fsync through ckptcheck-faultfs", ">= 0.50x", "not available", why),
            unavailable_row("drill's added cost per storage fault", "reported", "not available", why)};
  }
  return {save_row(s, faultfs), drill_cost_row(s)};
}

}  // namespace ckpt::bench
