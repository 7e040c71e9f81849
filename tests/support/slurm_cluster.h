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

}  // namespace ckpt::testing
