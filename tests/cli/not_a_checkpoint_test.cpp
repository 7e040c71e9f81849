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

TEST_F(NotACheckpointTest, TextAndJsonFilesAreUsageErrorsInVerifyAndInspect) {
  expect_usage_error(dir_.write("notes.txt", "loss went down\n"),
                     "notes.txt: a text file, not a tensor file");
  expect_usage_error(dir_.write("manifest.json", "{\"version\": 1}"), "manifest.json: a JSON document");
}

// numpy.save's .npy is read (formats/numpy_file.h): an array is one tensor, and a header in any other
// form than numpy.save writes is refused, since numpy's literal_eval could read it otherwise.
TEST_F(NotACheckpointTest, NumpyArraysAreReadAndOddHeadersRefused) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  const std::string preamble = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0';
  const std::string data("\0\0\x80\x3f\0\0\0\x40", 8);  // 1.0f, 2.0f
  const std::string array = dir_.write("arr.npy", preamble + header + data);
  CommandResult r = run_ckptcheck("inspect --json '" + array + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"name\":\"array\""), std::string::npos) << r.output;
  EXPECT_EQ(run_ckptcheck("verify '" + array + "'").exit_code, 0);
  std::string odd = header;
  odd.replace(odd.find("'descr'"), 7, "\"descr\"");
  r = run_ckptcheck("verify '" + dir_.write("odd.npy", preamble + odd + data) + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("reading_ambiguous"), std::string::npos) << r.output;
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
