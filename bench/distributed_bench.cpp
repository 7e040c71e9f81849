// verify --distributed: how evenly the split every task computes spreads the bytes (largest share
// over the mean share, for 8 and 64 tasks) on a 20,000-tensor checkpoint, on a sealed PyTorch DCP
// directory and on the 1 GiB synthetic checkpoint, and 1 against 2 tasks (mpirun, one thread each) on this
// machine; plus the inputs of the N-node model in docs/performance.md: the per-file metadata cost (verify
// --quick of the 20,000-tensor checkpoint's shards) and the bytes each task sends in the gather.
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <random>

#include "base/file_io.h"
#include "bench/bench.h"
#include "distributed/share_split.h"
#include "shards/checkpoint_writer.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/seal.h"

namespace ckpt::bench {

namespace {

constexpr int kTaskCounts[] = {8, 64};
constexpr size_t kThreadsPerTask = 2;  // this machine's cores; a typical node has more (finer units)

// 20,000 tensors as a transformer's training state lays them out: per parameter the weight and its
// two AdamW moments; per layer four matrices (64-256 KiB here) and six vectors (4-16 KiB).
Result<std::string> write_many_tensor_checkpoint(const std::string& root, bool quick, uint64_t* bytes) {
  const int params = quick ? 600 : 6667;  // x3 components = 20,001 tensors
  std::mt19937_64 rng(5);
  std::vector<uint64_t> sizes;
  uint64_t largest = 0;
  for (int p = 0; p < params; ++p) {
    const bool matrix = p % 10 < 4;
    const uint64_t kib = matrix ? 64 + rng() % 193 : 4 + rng() % 13;
    sizes.push_back(kib * 1024);
    largest = std::max(largest, kib * 1024);
  }
  std::vector<uint8_t> data(largest);
  for (auto& b : data) b = static_cast<uint8_t>(rng() & 0x3f);  // small finite floats' bytes
  std::vector<TensorView> views;
  const char* components[] = {"model", "optimizer", "optimizer"};
  const char* suffixes[] = {"", ".exp_avg", ".exp_avg_sq"};
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < params; ++p) {
      const std::string param = "model.layers." + std::to_string(p / 10) + ".p" + std::to_string(p % 10);
      const std::string name = c == 0 ? param : "optimizer." + param + suffixes[c];
      views.push_back(
          {name, components[c], DType::kF32, {static_cast<int64_t>(sizes[p] / 4)}, data.data(), sizes[p]});
    }
  }
  CheckpointWriteOptions options;
  options.num_shards = 16;
  CheckpointMetadata metadata;
  metadata.step = 1000;
  CKPT_ASSIGN_OR_RETURN(CommittedCheckpoint committed, write_checkpoint(root, views, metadata, options));
  *bytes = committed.bytes;
  return committed.dir;
}

// The units of one split and the task each went to.
struct Split {
  std::vector<uint64_t> sizes;
  std::vector<int> owners;
};

// Largest/mean share at 8 and 64 tasks of the split `split_for(tasks)` returns.
BenchRow balance_row(const std::string& what, const std::string& unit_note,
                     const std::function<Result<Split>(int tasks)>& split_for) {
  const std::string name = "verify --distributed split, " + what + ": largest/mean share at 8 / 64 tasks";
  BenchRow row;
  row.name = name;
  row.goal = "<= 1.05";
  std::string ours, baseline;
  double worst = 0;
  for (int tasks : kTaskCounts) {
    auto split = split_for(tasks);
    if (!split.is_ok()) return unavailable_row(name, row.goal, "error", split.status().message());
    const std::vector<uint64_t> shares = share_bytes(split->sizes, split->owners, tasks);
    const double balance = share_balance(shares);
    worst = std::max(worst, balance);
    char text[96];
    std::snprintf(text, sizeof text, "%s%.3f", ours.empty() ? "" : " / ", balance);
    ours += text;
    baseline += (baseline.empty() ? "" : " / ") + std::to_string(split->sizes.size()) + " units";
    row.numbers["tasks_" + std::to_string(tasks)] = {
        {"balance", balance}, {"units", split->sizes.size()}, {"share_bytes", shares}};
  }
  row.ours = ours;
  row.baseline = baseline + " (" + unit_note + ")";
  row.ratio = worst;
  row.met = worst <= 1.05 ? "yes" : "NO";
  return row;
}

// A ckptcheck checkpoint: the scan units verify plans for tasks x kThreadsPerTask workers.
BenchRow checkpoint_balance_row(const std::string& what, const std::string& dir) {
  return balance_row(what, std::to_string(kThreadsPerTask) + " threads a task",
                     [&](int tasks) -> Result<Split> {
                       CKPT_ASSIGN_OR_RETURN(
                           auto units, plan_verify_shares(dir, static_cast<size_t>(tasks), kThreadsPerTask));
                       Split split;
                       for (const ShareUnit& u : units) {
                         split.sizes.push_back(u.end - u.begin);
                         split.owners.push_back(u.task);
                       }
                       return split;
                     });
}

// A real PyTorch DCP directory (torch 1.13's FileSystemWriter, from Debian's python3-torch), sealed
// with the default piece size by the ckptcheck binary: verify --distributed splits the seal's
// pieces (and whole small files) among its tasks, the same split whatever the thread count.
BenchRow dcp_balance_row(const BenchSettings& s, uint64_t bytes) {
  const std::string root = s.work_dir + "/dcp-balance";
  const std::string dcp = root + "/dcp";
  const std::string what = "PyTorch DCP (" + format_mib(static_cast<double>(bytes)) + ", sealed)";
  (void)remove_tree(root);
  Status made = run_ok({"mkdir", "-p", root});
  // torch_baselines.py writes N randn(4096, 4096) F32 tensors (64 MiB each).
  const std::string tensors = std::to_string(std::max<uint64_t>(1, bytes / (64 * kMiB)));
  if (made.is_ok())
    made = run_ok({s.python, s.source_dir + "/bench/torch_baselines.py", "write-dcp", dcp, tensors});
  if (made.is_ok()) made = run_ok({s.ckptcheck_bin, "seal", dcp});
  if (!made.is_ok()) return unavailable_row(what, "<= 1.05", "not available", made.message());
  auto text = read_small_file(seal_path_for(dcp), 64 << 20);
  auto seal = text.is_ok() ? parse_seal(*text, seal_path_for(dcp)) : Result<Seal>(text.status());
  (void)remove_tree(root);
  if (!seal.is_ok()) return unavailable_row(what, "<= 1.05", "error", seal.status().message());
  const std::vector<uint64_t> sizes = sealed_unit_sizes(*seal);
  const std::string note = "seal pieces of " + format_mib(static_cast<double>(seal_piece_bytes(bytes)));
  return balance_row(what, note, [&](int tasks) -> Result<Split> {
    return Split{sizes, split_by_size(sizes, tasks)};
  });
}

std::vector<std::string> mpirun(int tasks, const BenchSettings& s, const std::string& dir) {
  return {"mpirun",        "-n",     std::to_string(tasks), "--oversubscribe", "--bind-to", "none",
          s.ckptcheck_bin, "verify", "--distributed",       "--jobs",          "1",         dir};
}

}  // namespace

std::vector<BenchRow> run_distributed_bench(const BenchSettings& s) {
  std::vector<BenchRow> rows;
  if (::geteuid() == 0) {  // Open MPI refuses root unless told twice
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  std::fprintf(stderr, "writing the 20,000-tensor checkpoint...\n");
  uint64_t many_bytes = 0;
  auto many = write_many_tensor_checkpoint(s.work_dir + "/many-tensors", s.quick, &many_bytes);
  if (!many.is_ok()) {
    rows.push_back(unavailable_row("verify --distributed split, 20,000 tensors", "<= 1.05", "error",
                                   many.status().message()));
  } else {
    rows.push_back(checkpoint_balance_row(std::string(s.quick ? "1,800" : "20,001") + "-tensor checkpoint (" +
                                              format_mib(static_cast<double>(many_bytes)) + ", 16 shards)",
                                          *many));
    // The per-file metadata cost: every task opens every shard and reads its header.
    // Exit 1 is a full run too: the layout has no resume state, which verify reports.
    auto quick =
        time_child(s.repetitions, {s.ckptcheck_bin, "verify", "--quick", "--jobs", "1", *many}, {0, 1});
    if (quick.is_ok()) {
      BenchRow row;
      row.name = "verify --quick (the metadata pass every task makes), 20,001-tensor checkpoint, 16 shards";
      row.ours = format_seconds(quick->timing.best_seconds);
      row.baseline = "per shard file " + format_seconds(quick->timing.best_seconds / 16);
      row.goal = "reported";
      row.met = "reported";
      row.numbers = {{"seconds", quick->timing.best_seconds}, {"files", 16}};
      rows.push_back(row);
    }
    (void)remove_tree(s.work_dir + "/many-tensors");
  }

  const uint64_t bytes = s.quick ? 64 * kMiB : 1024 * kMiB;
  std::fprintf(stderr, "writing and sealing a %s PyTorch DCP directory...\n",
               format_mib(static_cast<double>(bytes)).c_str());
  rows.push_back(dcp_balance_row(s, bytes));
  std::fprintf(stderr, "writing the %s distributed-verify checkpoint...\n",
               format_mib(static_cast<double>(bytes)).c_str());
  auto checkpoint = write_synthetic_checkpoint(s.work_dir + "/distributed", bytes, 8, 31);
  if (!checkpoint) {
    rows.push_back(unavailable_row("verify --distributed, 1 vs 2 tasks", "reported", "error",
                                   checkpoint.status().message()));
    return rows;
  }
  rows.push_back(checkpoint_balance_row(
      "synthetic checkpoint (" + format_mib(static_cast<double>(checkpoint->bytes)) + ", 8 shards)",
      checkpoint->dir));
  (void)read_files_once(checkpoint->shard_paths);
  const std::string name = "verify --distributed " + format_mib(static_cast<double>(checkpoint->bytes)) +
                           ": 2 tasks vs 1 task (mpirun, --jobs 1 each, this machine)";
  auto one = time_child(s.repetitions, mpirun(1, s, checkpoint->dir));
  auto two = time_child(s.repetitions, mpirun(2, s, checkpoint->dir));
  // The fixed cost of a distributed run: mpirun's start, MPI_Init, the planning and the gathers,
  // with no byte hashed (--quick).
  std::vector<std::string> fixed = mpirun(2, s, checkpoint->dir);
  fixed.insert(fixed.end() - 1, "--quick");
  auto launch = time_child(s.repetitions, fixed);
  auto plain = time_child(s.repetitions, {s.ckptcheck_bin, "verify", "--jobs", "2", checkpoint->dir});
  if (!one.is_ok() || !two.is_ok() || !plain.is_ok()) {
    const Status& bad = !one.is_ok() ? one.status() : !two.is_ok() ? two.status() : plain.status();
    rows.push_back(unavailable_row(name, "reported", "not available", "mpirun: " + bad.message()));
  } else {
    BenchRow row;
    row.name = name;
    const double t1 = one->timing.best_seconds, t2 = two->timing.best_seconds;
    row.ours = format_seconds(t2) + " (" + format_rate(checkpoint->bytes, t2) + ")";
    row.baseline = format_seconds(t1) + " (" + format_rate(checkpoint->bytes, t1) +
                   "); one process --jobs 2 " + format_seconds(plain->timing.best_seconds);
    row.ratio = t1 / t2;
    row.goal = "reported";
    row.met = "reported";
    row.numbers = {{"one_task_seconds", t1},
                   {"two_task_seconds", t2},
                   {"one_process_jobs2_seconds", plain->timing.best_seconds},
                   {"bytes", checkpoint->bytes}};
    rows.push_back(row);
    if (launch.is_ok()) {
      BenchRow fixed_row;
      fixed_row.name =
          "verify --distributed fixed cost: mpirun -n 2, MPI_Init, plan and gathers, no hashing (--quick)";
      fixed_row.ours = format_seconds(launch->timing.best_seconds);
      fixed_row.baseline = "2 tasks' whole verify " + format_seconds(t2) + "; scan part " +
                           format_seconds(t2 - launch->timing.best_seconds) + " (" +
                           format_rate(checkpoint->bytes, t2 - launch->timing.best_seconds) + ")";
      fixed_row.goal = "reported";
      fixed_row.met = "reported";
      fixed_row.numbers = {{"seconds", launch->timing.best_seconds}};
      rows.push_back(fixed_row);
    }
  }
  (void)remove_tree(checkpoint->root);
  return rows;
}

}  // namespace ckpt::bench
