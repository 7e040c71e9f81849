// The built-in launcher: what torchrun does for one node of N, and nothing more. It sets torchrun's
// environment contract (torchrun_environment below) for P children of one command, forwards SIGINT/SIGTERM to
// them, and never hangs: once one rank fails (or a signal was forwarded), the ranks still running after a
// grace period are SIGKILLed. Ranks die with the launcher (PR_SET_PDEATHSIG), so SIGKILLing the launcher
// kills every rank. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/process/child_process.h"
#include "verifier/process/slurm_environment.h"

namespace ckpt {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;       // nodes taking part; this launcher starts the ranks of one of them
  int node_rank = 0;    // which node this is, 0..nnodes-1
  int master_port = 0;  // 0: a free loopback port (bound to port 0, then released); one node only
  std::string master_addr = "127.0.0.1";
  std::vector<std::string> argv;  // argv[0] is the program (a path; not searched in PATH)
  double grace_seconds = 5;       // after the first failure, before SIGKILL
  // After the first rank exits 0, how long the others have to exit too before they are SIGKILLed.
  // A rank that never ends after its peers finished is a bug a long run would pay for in idle
  // allocation: seen with torch 1.13's DDP, whose Reducer, dropped at interpreter exit after
  // destroy_process_group, joins a Gloo worker that waits for the GIL the exiting thread holds.
  double finish_window_seconds = 60;
};

struct RankExit {
  int rank = 0;
  ChildExit exit;
  bool stopped_by_launcher = false;  // killed because another rank failed
  bool outlived_finish = false;      // killed: still running finish_window_seconds after a rank exited 0
};

struct LaunchOutcome {
  int master_port = 0;
  std::vector<RankExit> ranks;
  bool all_ok() const;
  // "rank 1: killed by SIGKILL", one line per rank.
  std::vector<std::string> report_lines() const;
};

Result<int> pick_free_loopback_port();

// The rank across all nodes of this node's local rank `local_rank`.
inline int global_rank(const LaunchOptions& options, int local_rank) {
  return options.node_rank * options.nproc_per_node + local_rank;
}

// torchrun's environment for local rank `local_rank` of this node: RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT, and
// OMP_NUM_THREADS=1 unless `omp_num_threads_set` (torchrun's default, so P ranks do not each take
// every core). "NAME=value" strings.
std::vector<std::string> torchrun_environment(const LaunchOptions& options, int local_rank, int master_port,
                                              bool omp_num_threads_set);

Result<LaunchOutcome> launch_ranks(const LaunchOptions& options);

// Under Slurm (`srun ... ckptcheck launch -- PROGRAM`), each task is one rank: the same variables
// from the step's (RANK = SLURM_PROCID, WORLD_SIZE = the step's tasks, LOCAL_RANK = SLURM_LOCALID,
// GROUP_RANK = SLURM_NODEID, MASTER_ADDR = `master_addr`, MASTER_PORT = slurm_master_port).
std::vector<std::string> slurm_task_torchrun_environment(const SlurmTask& task,
                                                         const std::string& master_addr,
                                                         bool omp_num_threads_set);

// One launcher per node of a Slurm step (`srun --ntasks-per-node=1 ckptcheck launch
// --nproc-per-node P -- PROGRAM`): nnodes and node_rank from the step, rank 0's node and port as
// above. kInvalidArgument when the step runs more than one task on a node.
Result<LaunchOptions> launch_options_from_slurm(const SlurmTask& task, int nproc_per_node,
                                                const std::string& master_addr);

}  // namespace ckpt
