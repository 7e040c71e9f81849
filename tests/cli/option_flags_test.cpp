// The library's option validation names fields ("`save_at` must be >= 1"); the CLI shows the user
// the flag that sets each field (verifier/cli/option_flags.h), so the user reads the same text as
// when the library spelled flags itself.
#include "verifier/cli/option_flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/drill/drill.h"
#include "verifier/drill/drill_plan.h"
#include "verifier/drill/program_launcher.h"

namespace ckpt {
namespace {

using testing::CommandResult;
using testing::run_ckptcheck;

TEST(OptionFlags, BackquotedFieldsBecomeTheirFlags) {
  const FieldFlags flags = {{"save_at", "--save-at"}, {"resume_steps", "--resume-steps"}};
  EXPECT_EQ(with_flags("`save_at` and `resume_steps` must be >= 1 (got N=0, K=0)", flags),
            "--save-at and --resume-steps must be >= 1 (got N=0, K=0)");
  // Other backquoted text, a field the table lacks, and a lone backquote pass through.
  EXPECT_EQ(with_flags("run `ckptcheck seal DIR` and `other` `save_at` `", flags),
            "run `ckptcheck seal DIR` and `other` --save-at `");
  EXPECT_EQ(with_flags("no fields here", flags), "no fields here");
}

// Every way plan_drill and the launcher check refuse options names only fields the drill's table
// spells as flags: nothing backquoted reaches the user.
TEST(OptionFlags, TheDrillTableCoversEveryFieldTheDrillNames) {
  std::vector<DrillOptions> bad;
  auto add = [&bad](auto change) {
    DrillOptions o;
    o.command = {"/bin/true"};
    o.save_at = 4;
    change(o);
    bad.push_back(o);
  };
  add([](DrillOptions& o) { o.save_at = -1; });
  add([](DrillOptions& o) { o.inject = "reset-scheduler"; });
  add([](DrillOptions& o) { o.resume_steps = 0; });
  add([](DrillOptions& o) { o.save_at = 3, o.faults = {"bitflip"}; });
  add([](DrillOptions& o) { o.save_every = 3, o.faults = {"bitflip"}; });
  add([](DrillOptions& o) { o.faults = {"melt"}; });
  add([](DrillOptions& o) { o.faults = {"bitflip"}, o.modes = {KillMode::kDuringSave}; });
  add([](DrillOptions& o) { o.shards = 0; });
  add([](DrillOptions& o) { o.launcher = "pbs"; });
  add([](DrillOptions& o) { o.nodes = 2; });
  add([](DrillOptions& o) { o.launcher = "slurm", o.nodes = 0; });
  for (const DrillOptions& o : bad) {
    auto plan = plan_drill(o, -1);
    ASSERT_FALSE(plan.is_ok());
    const std::string shown = with_flags(plan.status().message(), drill_field_flags());
    EXPECT_EQ(shown.find('`'), std::string::npos) << shown;
  }
  // The live drill refuses before it starts anything.
  for (auto change :
       {+[](DrillOptions& o) { o.command.clear(); }, +[](DrillOptions& o) { o.inject = "x"; },
        +[](DrillOptions& o) { o.save_at = 4; }, +[](DrillOptions& o) { o.modes = {KillMode::kDuringSave}; },
        +[](DrillOptions& o) { o.faults = {"melt"}; }}) {
    DrillOptions o;
    o.command = {"/bin/true"};
    o.live_metrics = "/nonexistent/RUN_METRICS.jsonl";
    change(o);
    const DrillOutcome out = run_resume_drill(o);
    ASSERT_EQ(out.exit_code, 2);
    const std::string shown = with_flags(out.error, drill_field_flags());
    EXPECT_EQ(shown.find('`'), std::string::npos) << shown;
    EXPECT_NE(shown.find("--"), std::string::npos) << shown;
  }
}

TEST(OptionFlags, TheDrillUserSeesFlags) {
  ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built";
  const CommandResult r = run_ckptcheck("drill --save-at 2 --resume-steps 0 --json -- /bin/true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::string line = "--save-at and --resume-steps must be >= 1 (got N=2, K=0)";
  EXPECT_NE(r.output.find("ckptcheck drill: error: " + line), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"error\": \"" + line + "\""), std::string::npos)
      << "report.json too: " << r.output;
  EXPECT_EQ(r.output.find('`'), std::string::npos) << r.output;
  const CommandResult live = run_ckptcheck("drill --live /nonexistent.jsonl --kill both -- /bin/true");
  EXPECT_EQ(live.exit_code, 2) << live.output;
  EXPECT_NE(live.output.find("--kill does not apply to --live: the live run is never killed"),
            std::string::npos)
      << live.output;
}

TEST(OptionFlags, SealAndVerifyUsersSeeFlags) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/model.safetensors";
  testing::write_file_bytes(file, {});
  const CommandResult seal = run_ckptcheck("seal --integrity-json '" + file + "'");
  EXPECT_EQ(seal.exit_code, 2) << seal.output;
  EXPECT_NE(seal.output.find(file + ": --integrity-json seals a directory"), std::string::npos)
      << seal.output;
  const CommandResult pilot = run_ckptcheck("pilot --config /nonexistent.yaml");
  EXPECT_EQ(pilot.exit_code, 2) << pilot.output;
  EXPECT_NE(pilot.output.find("pilot: nothing to measure: give --matrix and/or --scaling"), std::string::npos)
      << pilot.output;
}

}  // namespace
}  // namespace ckpt
