// The command line before any command runs, through the real binaries: no command lists the
// commands, a mistyped command or option gets "did you mean", and --help shows users what they can
// use (not the internal ckptcheck-train binary or the drill's hooks) and what the drill's options
// become in a program's environment. All usage errors exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class CommandLineUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
  static bool has(const CommandResult& r, const std::string& text) {
    return r.output.find(text) != std::string::npos;
  }
  // `ckptcheck ARGS` is a usage error (exit 2) whose message holds `text`; returns the result.
  static CommandResult usage_error(const std::string& args, const std::string& text) {
    CommandResult r = run_ckptcheck(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_TRUE(has(r, text)) << args << ": " << r.output;
    return r;
  }
};

TEST_F(CommandLineUsageTest, NoCommandListsTheCommands) {
  const CommandResult r = run_ckptcheck("");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const char* command : {"drill", "verify", "inspect", "seal", "train", "plan"})
    EXPECT_TRUE(has(r, std::string("\n  ") + command + " ")) << command << ":\n" << r.output;
  EXPECT_FALSE(has(r, "A subcommand is required")) << r.output;
}

TEST_F(CommandLineUsageTest, MistypedCommandGetsTheClosestOne) {
  usage_error("verfy x", "unknown command 'verfy'; did you mean 'verify'?");
  usage_error("--sha256 openssl inspct x", "unknown command 'inspct'; did you mean 'inspect'?");
  usage_error("frobnicate", "unknown command 'frobnicate' (");  // nothing close: no guess
}

TEST_F(CommandLineUsageTest, MistypedOptionGetsTheClosestOne) {
  usage_error("drill --save-a 4 -- /bin/true",
              "ckptcheck drill: unknown option '--save-a'; did you mean '--save-at'?");
  usage_error("inspect --jsn x.pt", "unknown option '--jsn'; did you mean '--json'?");
  // A value that starts with a dash belongs to its option: the unknown one is named.
  const CommandResult r =
      usage_error("drill --slurm-args=--partition=gpu --save-evry 2 --save-at 4 -- /bin/true",
                  "unknown option '--save-evry'; did you mean '--save-every'");
  EXPECT_FALSE(has(r, "'--partition'")) << r.output;
}

TEST_F(CommandLineUsageTest, TrainHelpShowsNeitherTheInternalBinaryNorTheDrillHooks) {
  for (const std::string args : {"--help", "train --help"}) {
    const CommandResult r = run_ckptcheck(args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.output;
    EXPECT_FALSE(has(r, "ckptcheck-train")) << args << ": " << r.output;
  }
  const CommandResult r = run_ckptcheck("train --help");
  EXPECT_TRUE(has(r, "Usage: ckptcheck train")) << r.output;
  EXPECT_TRUE(has(r, "--save-every")) << r.output;
  for (const char* hook : {"--drill-hold", "--drill-hold-step", "--inject"})
    EXPECT_FALSE(has(r, hook)) << hook << ":\n" << r.output;
  EXPECT_TRUE(has(r, "native | safetensors | hdf5")) << r.output;
}

TEST_F(CommandLineUsageTest, DrillHelpSaysWhatAppliesToProgramsAndWhatTheyAreGiven) {
  const CommandResult r = run_ckptcheck("drill --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "native | safetensors | hdf5")) << r.output;
  // The built-in workload's own options stand under their own heading, after the general ones.
  const size_t group = r.output.find("Built-in workload only (--config, not -- COMMAND):");
  ASSERT_NE(group, std::string::npos) << r.output;
  for (const char* option : {"--shards", "--format", "--inject", "--long-run"}) {
    const size_t at = r.output.find(std::string("  ") + option + " ");
    EXPECT_GT(at, group) << option << " is not in the built-in group:\n" << r.output;
  }
  EXPECT_LT(r.output.find("  --save-at"), group) << r.output;
  EXPECT_TRUE(has(r, "required with -- COMMAND")) << r.output;
  // How N and K reach a program.
  EXPECT_TRUE(has(r, "CKPTCHECK_STEPS=N+K")) << r.output;
  EXPECT_TRUE(has(r, "CKPTCHECK_SAVE_EVERY")) << r.output;
}

}  // namespace
}  // namespace ckpt
