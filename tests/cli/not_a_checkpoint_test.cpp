// Paths that name no checkpoint, through the real binary: `verify` and `inspect` answer alike,
// with exit 2 (usage: the user pointed at the wrong thing, nothing failed a check), what the path
// is, what to pass instead, and no advice to seal it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

const std::string kNotACheckpointTorchFiles = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch";

class NotACheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
  // Both commands on `path`: exit 2, `expected` in the answer, no seal advice.
  static void expect_usage_error(const std::string& path, const std::string& expected) {
    for (const std::string command : {"verify", "inspect"}) {
      const CommandResult r = run_ckptcheck(command + " '" + path + "'");
      EXPECT_EQ(r.exit_code, 2) << command << " " << path << ":\n" << r.output;
      EXPECT_NE(r.output.find(expected), std::string::npos) << command << " " << path << ":\n" << r.output;
      EXPECT_EQ(r.output.find("seal"), std::string::npos) << command << " " << path << ":\n" << r.output;
    }
  }
  TempDir dir_;
};

TEST_F(NotACheckpointTest, TextNumpyAndJsonFilesAreUsageErrorsInVerifyAndInspect) {
  expect_usage_error(dir_.write("notes.txt", "loss went down\n"),
                     "notes.txt: a text file, not a tensor file");
  expect_usage_error(dir_.write("arr.npy", std::string("\x93NUMPY\x01\x00v\x00{'descr': '<f4'}", 24)),
                     "arr.npy: a NumPy .npy array file");
  expect_usage_error(dir_.write("manifest.json", "{\"version\": 1}"), "manifest.json: a JSON document");
}

TEST_F(NotACheckpointTest, ACheckpointsManifestNamesItsDirectory) {
  const std::string ckpt = save_training_state(dir_.path(), full_training_state());
  for (const std::string command : {"verify", "inspect"}) {
    const CommandResult r = run_ckptcheck(command + " '" + ckpt + "/manifest.json'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("it is a file of the ckptcheck checkpoint " + ckpt +
                            ": pass the directory, `ckptcheck " + command + " " + ckpt + "`"),
              std::string::npos)
        << r.output;
  }
}

TEST_F(NotACheckpointTest, ARunDirNamesTheCheckpointRootOneLevelDown) {
  const std::string ckpt = save_training_state(dir_ / "ckpt", full_training_state());
  ASSERT_TRUE(fs::create_directories(dir_ / "logs"));
  dir_.write("logs/train.log", "step 1\n");
  for (const std::string command : {"verify", "inspect"}) {
    const CommandResult r = run_ckptcheck(command + " '" + dir_.path() + "'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("it holds, one level down: a checkpoint root (ckpt, latest " +
                            fs::path(ckpt).filename().string() + ")"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("`ckptcheck " + command + " " + dir_.path() + "/ckpt`"), std::string::npos)
        << r.output;
  }
}

TEST_F(NotACheckpointTest, AFolderOfStepFilesNamesThemAndTheNewest) {
  for (const char* name : {"step_2.pt", "step_10.pt", "step_6.pt"})
    fs::copy_file(kNotACheckpointTorchFiles + "/adamw_state.pt", dir_ / name);
  const CommandResult r = run_ckptcheck("verify '" + dir_.path() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("3 torch_save files (step_10.pt, step_2.pt, step_6.pt)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("e.g. `ckptcheck verify " + dir_.path() + "/step_10.pt`"), std::string::npos)
      << r.output;
}

TEST_F(NotACheckpointTest, AMissingFileIsNamedAsOne) {
  for (const std::string command : {"verify", "inspect"}) {
    const CommandResult r = run_ckptcheck(command + " '" + dir_ / "missing.pt" + "'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("missing.pt: no such file or directory"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("checkpoint directory"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace ckpt
