// libhdf5 is loaded by the commands that read or write HDF5, and by no other (formats/hdf5_loader.h):
// linked, it and its dependencies cost every ckptcheck process ~18 ms at start. The dynamic
// loader's own log (LD_DEBUG=libs) says which libraries a process loaded, dlopen'd ones included.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::run_command;

const std::string kTestData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data";

testing::CommandResult run_logging_libraries(const std::string& args) {
  return run_command(std::string("LD_DEBUG=libs CKPTCHECK_NO_PROGRESS=1 ") + CKPTCHECK_BIN + " " + args);
}

// Whether the log has the line the loader writes as it initialises libhdf5.
bool log_shows_hdf5_loaded(const testing::CommandResult& r) {
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("calling init: ") != std::string::npos && line.find("/libhdf5") != std::string::npos)
      return true;
  }
  return false;
}

TEST(Hdf5Loading, OnlyTheCommandsThatReadHdf5LoadTheLibrary) {
  // A native checkpoint: verified and inspected without libhdf5 in the process.
  for (const std::string command : {"verify --quick", "verify", "inspect"}) {
    const auto native = run_logging_libraries(command + " '" + kTestData + "/native/manifest_v2'");
    ASSERT_EQ(native.exit_code, 0) << native.output;
    ASSERT_NE(native.output.find("calling init: "), std::string::npos)
        << "the loader's log is missing, so this test could not see a library load";
    EXPECT_FALSE(log_shows_hdf5_loaded(native)) << command << " loaded libhdf5:\n" << native.output;
  }
  // An HDF5 file: the library is loaded, and the file read as before.
  const auto hdf5 = run_logging_libraries("inspect '" + kTestData + "/hdf5/keras_like.weights.h5'");
  ASSERT_EQ(hdf5.exit_code, 0) << hdf5.output;
  EXPECT_TRUE(log_shows_hdf5_loaded(hdf5)) << hdf5.output;
  EXPECT_NE(hdf5.output.find("layers/dense/vars/0"), std::string::npos) << hdf5.output;
}

}  // namespace
}  // namespace ckpt
