// `ckptcheck pilot`: measures what the long run's open questions need before it is booked.
//   --matrix        precision x activation checkpointing (verifier/pilot/precision_matrix.h)
//   --scaling 1,2,3 the same config at those world sizes through `launch`, its step split into
//                   compute, communication and input wait, and the data-parallel model of
//                   verifier/plan/scaling_model.h calibrated on them and checked against them.
// Every run is a fresh child process; the study itself is torch-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/pilot/precision_matrix.h"

namespace ckpt {

class Progress;

struct PilotStudyOptions {
  std::string config_path;
  bool matrix = false;
  std::vector<int> scaling_worlds;  // empty: no scaling study
  int64_t steps = 0;                // 0: the config's steps
  MatrixOptions matrix_options;
  std::string work_dir;    // a fresh scratch dir is made inside; default $TMPDIR or /tmp
  std::string executable;  // the ckptcheck binary; default this process's
  double child_timeout_seconds = 600;
  int cores = 0;  // 0: the cores this process may run on
};

struct PilotStudy {
  int exit_code = 0;  // 0 every check passed, 1 a check failed, 2 error
  std::string error;
  nlohmann::json report;  // {"kind": "ckptcheck-pilot", "config", "steps", "matrix"?, "scaling"?}
};

PilotStudy run_pilot_study(const PilotStudyOptions& options, Progress* progress = nullptr);

}  // namespace ckpt
