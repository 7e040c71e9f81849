// What every test against the real Slurm checks first: the cluster the slurm_cluster ctest fixture
// started (tests/slurm/slurm_cluster.sh) is named by SLURM_CONF and answers with both nodes. A
// missing cluster fails the test; it never skips it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/support/test_support.h"

namespace ckpt::testing {

inline ::testing::AssertionResult slurm_cluster_is_up() {
  const char* conf = std::getenv("SLURM_CONF");
  if (conf == nullptr || ::access(conf, R_OK) != 0)
    return ::testing::AssertionFailure() << "no Slurm cluster: run these through ctest, whose slurm_cluster "
                                            "fixture starts one (tests/slurm/slurm_cluster.sh)";
  const CommandResult nodes = run_command("sinfo --noheader --Node --format='%N %t' 2>&1");
  if (nodes.exit_code != 0 || nodes.output.find("n2") == std::string::npos)
    return ::testing::AssertionFailure()
           << "sinfo does not list nodes n1 and n2 (exit " << nodes.exit_code << "): " << nodes.output;
  return ::testing::AssertionSuccess();
}

// After a test: no node is drained. slurmd drains a node whose step's tasks outlive their SIGKILL by
// UnkillableStepTimeout ("Kill task failed"); every later test would then wait for an allocation that
// never comes. The test that drained it fails here, with slurmd's reason and log, and the node is
// returned to service so that the tests after it judge only themselves.
inline ::testing::AssertionResult no_slurm_node_drained() {
  const CommandResult nodes = run_command("sinfo --noheader --Node --format='%N %t %E' 2>&1");
  std::string drained;
  size_t start = 0;
  while (start < nodes.output.size()) {
    const size_t end = nodes.output.find('\n', start);
    const std::string line =
        nodes.output.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? nodes.output.size() : end + 1;
    if (line.find("drain") == std::string::npos && line.find("drng") == std::string::npos) continue;
    drained += line + "\n";
    const std::string node = line.substr(0, line.find(' '));
    const char* conf = std::getenv("SLURM_CONF");
    const std::string log =
        conf ? std::string(conf).substr(0, std::string(conf).rfind('/')) + "/log/slurmd-" + node + ".log"
             : std::string();
    if (!log.empty()) drained += run_command("tail -n 5 '" + log + "' 2>&1").output;
    (void)run_command("scontrol update nodename=" + node + " state=resume 2>&1");
  }
  if (drained.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "a Slurm node was drained during this test (returned to service):\n"
                                       << drained;
}

}  // namespace ckpt::testing
