// What a Slurm job step tells each of its tasks through the environment (SLURM_PROCID,
// SLURM_STEP_NODELIST, ...), read once and turned into torchrun's contract (RANK, WORLD_SIZE,
// MASTER_ADDR, ...). srun sets SLURM_* but none of torchrun's variables, so a program written for
// torchrun needs this translation under Slurm. Pure functions over the variables: no Slurm call.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// One task of a running srun step, as its environment describes it.
struct SlurmTask {
  int64_t job_id = 0;
  int64_t step_id = 0;
  int proc_id = 0;             // SLURM_PROCID: this task's rank in the step
  int local_id = 0;            // SLURM_LOCALID: its rank on this node
  int node_id = 0;             // SLURM_NODEID: this node's index in the step
  int num_tasks = 0;           // SLURM_STEP_NUM_TASKS
  int num_nodes = 0;           // SLURM_STEP_NUM_NODES
  int tasks_on_this_node = 0;  // from SLURM_STEP_TASKS_PER_NODE ("2(x3),1")
  std::string first_node;      // the step's first node name (rank 0 runs there)
  int reserved_port = 0;       // first port of SLURM_STEP_RESV_PORTS; 0 when Slurm reserved none
};

using EnvironmentLookup = std::function<const char*(const char*)>;

// The task this process is, when it runs inside an srun step (SLURM_STEP_ID set; a batch
// script's own shell is not a step); nullopt outside one. kInvalidArgument names the variable
// that is missing or malformed.
Result<std::optional<SlurmTask>> slurm_task_from_environment(const EnvironmentLookup& lookup);

// The first host of a Slurm hostlist: "n[1-2],gpu7" -> "n1", "node[007-009]" -> "node007".
Result<std::string> first_host_of_hostlist(const std::string& hostlist);

// How many tasks node `node_id` runs, from a tasks-per-node list like "2(x3),1".
Result<int> tasks_on_node(const std::string& tasks_per_node, int node_id);

// The rendezvous port every task of the step agrees on without talking: the first reserved port,
// else one derived from the job and step ids (concurrent steps of one job get different ports).
int slurm_master_port(const SlurmTask& task);

}  // namespace ckpt
