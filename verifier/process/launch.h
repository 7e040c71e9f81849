// The built-in launcher: what torchrun does for one node, and nothing more. It sets torchrun's
// environment contract (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) for P children of
// one command, forwards SIGINT/SIGTERM to them, and never hangs: once one rank fails (or a signal
// was forwarded), the ranks still running after a grace period are SIGKILLed. Ranks die with the launcher
// (PR_SET_PDEATHSIG), so SIGKILLing the launcher kills every rank. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/process/child_process.h"

namespace ckpt {

struct LaunchOptions {
  int nproc_per_node = 1;
  int master_port = 0;  // 0: a free loopback port (bound to port 0, then released)
  std::string master_addr = "127.0.0.1";
  std::vector<std::string> argv;  // argv[0] is the program (a path; not searched in PATH)
  double grace_seconds = 5;       // after the first failure, before SIGKILL
};

struct RankExit {
  int rank = 0;
  ChildExit exit;
  bool stopped_by_launcher = false;  // killed because another rank failed
};

struct LaunchOutcome {
  int master_port = 0;
  std::vector<RankExit> ranks;
  bool all_ok() const;
  // "rank 1: killed by SIGKILL", one line per rank.
  std::vector<std::string> report_lines() const;
};

Result<int> pick_free_loopback_port();

Result<LaunchOutcome> launch_ranks(const LaunchOptions& options);

}  // namespace ckpt
