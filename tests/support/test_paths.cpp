#include "tests/support/test_paths.h"

namespace ckpt::testing {

// Set by CMake on this file only (CMakeLists.txt: test_paths).
const char* source_dir() {
  return CKPTCHECK_SOURCE_DIR_PATH;
}
const char* ckptcheck_bin() {
  return CKPTCHECK_BIN_PATH;
}

}  // namespace ckpt::testing
