// torchrun's variables from a Slurm step's: the hostlist and tasks-per-node syntax Slurm writes,
// Slurm's own rank numbering (cyclic distribution), and a clear error for a malformed variable.
#include "verifier/process/slurm_environment.h"

#include <gtest/gtest.h>

#include <map>

#include "verifier/process/launch.h"

namespace ckpt {
namespace {

// The variables srun set for task 1 of `srun -N2 --ntasks-per-node=2 --distribution=cyclic`.
std::map<std::string, std::string> step_variables() {
  return {{"SLURM_JOB_ID", "42"},
          {"SLURM_STEP_ID", "3"},
          {"SLURM_PROCID", "1"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "1"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_STEP_RESV_PORTS", "25509-25510"}};
}

EnvironmentLookup lookup_in(const std::map<std::string, std::string>& vars) {
  return [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmHostlist, FirstHostKeepsPrefixSuffixAndZeroPadding) {
  EXPECT_EQ(*first_host_of_hostlist("n[1-2]"), "n1");
  EXPECT_EQ(*first_host_of_hostlist("node[007-009,012],gpu5"), "node007");
  EXPECT_EQ(*first_host_of_hostlist("gpu5,node[1-3]"), "gpu5");
  EXPECT_EQ(*first_host_of_hostlist("rack[2]-node"), "rack2-node");
  EXPECT_FALSE(first_host_of_hostlist("").is_ok());
  EXPECT_FALSE(first_host_of_hostlist("[1-2]").is_ok());
  EXPECT_FALSE(first_host_of_hostlist("n[a-b]").is_ok());
  EXPECT_FALSE(first_host_of_hostlist("n[1-2").is_ok());
}

TEST(SlurmTasksPerNode, ExpandsRepeatsAndRefusesWhatItCannotRead) {
  EXPECT_EQ(*tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(*tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(*tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(*tasks_on_node("4", 0), 4);
  EXPECT_FALSE(tasks_on_node("2(x3),1", 4).is_ok());
  EXPECT_FALSE(tasks_on_node("2(x3", 0).is_ok());
  EXPECT_FALSE(tasks_on_node("two", 0).is_ok());
}

TEST(SlurmTask, OutsideAStepIsNoTask) {
  const std::map<std::string, std::string> batch = {{"SLURM_JOB_ID", "42"}, {"SLURM_PROCID", "0"}};
  auto task = slurm_task_from_environment(lookup_in(batch));
  ASSERT_TRUE(task.is_ok()) << task.status().to_string();
  EXPECT_FALSE(task->has_value());  // a batch script's shell is not a step
}

TEST(SlurmTask, ReadsEveryVariableOfAStepTask) {
  const auto vars = step_variables();
  auto task = slurm_task_from_environment(lookup_in(vars));
  ASSERT_TRUE(task.is_ok() && task->has_value()) << task.status().to_string();
  const SlurmTask& t = **task;
  EXPECT_EQ(t.job_id, 42);
  EXPECT_EQ(t.step_id, 3);
  EXPECT_EQ(t.proc_id, 1);
  EXPECT_EQ(t.node_id, 1);
  EXPECT_EQ(t.num_tasks, 4);
  EXPECT_EQ(t.tasks_on_this_node, 2);
  EXPECT_EQ(t.first_node, "n1");
  EXPECT_EQ(slurm_master_port(t), 25509);
}

TEST(SlurmTask, AMalformedVariableIsNamedInTheError) {
  auto vars = step_variables();
  vars["SLURM_PROCID"] = "one";
  auto task = slurm_task_from_environment(lookup_in(vars));
  ASSERT_FALSE(task.is_ok());
  EXPECT_NE(task.status().message().find("SLURM_PROCID"), std::string::npos) << task.status().message();
  EXPECT_NE(task.status().message().find("'one'"), std::string::npos) << task.status().message();
  vars = step_variables();
  vars.erase("SLURM_STEP_NODELIST");
  task = slurm_task_from_environment(lookup_in(vars));
  ASSERT_FALSE(task.is_ok());
  EXPECT_NE(task.status().message().find("SLURM_STEP_NODELIST"), std::string::npos);
  vars = step_variables();
  vars["SLURM_PROCID"] = "9";  // outside the step's 4 tasks
  EXPECT_FALSE(slurm_task_from_environment(lookup_in(vars)).is_ok());
}

TEST(SlurmTask, WithoutReservedPortsConcurrentStepsOfAJobGetDifferentPorts) {
  auto vars = step_variables();
  vars.erase("SLURM_STEP_RESV_PORTS");
  const SlurmTask a = **slurm_task_from_environment(lookup_in(vars));
  vars["SLURM_STEP_ID"] = "4";
  const SlurmTask b = **slurm_task_from_environment(lookup_in(vars));
  EXPECT_NE(slurm_master_port(a), slurm_master_port(b));
  EXPECT_GE(slurm_master_port(a), 20000);
  EXPECT_LT(slurm_master_port(a), 60000);
}

TEST(SlurmTask, TorchrunVariablesUseSlurmsRankNumbering) {
  const auto vars = step_variables();
  const SlurmTask t = **slurm_task_from_environment(lookup_in(vars));
  const std::vector<std::string> env = slurm_task_torchrun_environment(t, "10.0.0.7", false);
  auto has = [&env](const std::string& kv) { return std::find(env.begin(), env.end(), kv) != env.end(); };
  // Cyclic distribution: task 1 runs on node 1 as its local rank 0, and is still rank 1.
  EXPECT_TRUE(has("RANK=1"));
  EXPECT_TRUE(has("ROLE_RANK=1"));
  EXPECT_TRUE(has("LOCAL_RANK=0"));
  EXPECT_TRUE(has("WORLD_SIZE=4"));
  EXPECT_TRUE(has("LOCAL_WORLD_SIZE=2"));
  EXPECT_TRUE(has("GROUP_RANK=1"));
  EXPECT_TRUE(has("MASTER_ADDR=10.0.0.7"));
  EXPECT_TRUE(has("MASTER_PORT=25509"));
  EXPECT_TRUE(has("OMP_NUM_THREADS=1"));
}

TEST(SlurmTask, OneLauncherPerNodeTakesNodesAndPortFromTheStep) {
  auto vars = step_variables();
  vars["SLURM_STEP_TASKS_PER_NODE"] = "1(x2)";
  vars["SLURM_STEP_NUM_TASKS"] = "2";
  vars["SLURM_LOCALID"] = "0";
  const SlurmTask t = **slurm_task_from_environment(lookup_in(vars));
  auto o = launch_options_from_slurm(t, 4, "n1-addr");
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(o->nnodes, 2);
  EXPECT_EQ(o->node_rank, 1);
  EXPECT_EQ(o->nproc_per_node, 4);
  EXPECT_EQ(o->master_port, 25509);
  EXPECT_EQ(global_rank(*o, 0), 4);
  // Two tasks on a node, each starting P ranks, would double the node's ranks.
  const SlurmTask two = **slurm_task_from_environment(lookup_in(step_variables()));
  EXPECT_FALSE(launch_options_from_slurm(two, 4, "n1").is_ok());
}

}  // namespace
}  // namespace ckpt
