// plan_drill and the launcher check refuse impossible option combinations in terms of DrillOptions'
// fields, quoted in backquotes: the library knows no CLI flag (the CLI maps the fields to its flags,
// tests/cli/option_flags_test.cpp).
#include "verifier/drill/drill_plan.h"

#include <gtest/gtest.h>

#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/drill/program_launcher.h"

namespace ckpt {
namespace {

DrillOptions program_options() {
  DrillOptions o;
  o.command = {"/bin/true"};
  o.save_at = 4;
  return o;
}

TEST(DrillPlan, ValidationNamesTheOptionsFieldsNotFlags) {
  DrillOptions o = program_options();
  o.resume_steps = 0;
  auto plan = plan_drill(o, -1);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().message(), "`save_at` and `resume_steps` must be >= 1 (got N=4, K=0)");

  o = program_options();
  o.save_at = -1;
  plan = plan_drill(o, -1);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().message(), "drill `command` needs `save_at` N (N >= 1)");

  o = program_options();
  o.faults = {"bitflip"};
  o.modes = {KillMode::kDuringSave};
  plan = plan_drill(o, -1);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().message(),
            "`faults` truncate, bitflip, drop-file, stale-file damage the after-save checkpoint: use `modes` "
            "after-save|both");
  EXPECT_EQ(plan.status().message().find("--"), std::string::npos);
}

TEST(DrillPlan, LauncherValidationNamesTheOptionsFields) {
  DrillOptions o = program_options();
  o.nodes = 2;
  const Status s = check_launcher_options(o);
  EXPECT_EQ(s.message(), "`nodes`, `resume_nodes` and `slurm_args` need `launcher` slurm");
  o.launcher = "pbs";
  EXPECT_EQ(check_launcher_options(o).message(), "`launcher`: expected local or slurm, got 'pbs'");
  EXPECT_TRUE(check_launcher_options(program_options()).is_ok());
}

TEST(DrillPlan, VerifyOptionsAKindCannotHonourAreNamedByField) {
  VerifyOptions o;
  o.weights_only = true;
  const Status s = refuse_unhonoured_options(CheckpointKind::kCkptcheck, o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind("`weights_only`: a ckptcheck checkpoint's manifest", 0), 0u) << s.message();
}

}  // namespace
}  // namespace ckpt
