// Where the tests find the source tree and the built `ckptcheck`.
//
// The two paths are compiled into one small file (test_paths.cpp) instead of into every test: as
// -D definitions they were part of every test's preprocessed text, which differs from clone to
// clone, so ccache could never give one clone's test objects to the next. The macros keep the
// spelling the tests have always used.
#pragma once

namespace ckpt::testing {

// The repository root this build was configured from.
const char* source_dir();
// The `ckptcheck` program this build produced.
const char* ckptcheck_bin();

}  // namespace ckpt::testing

#define CKPTCHECK_SOURCE_DIR (::ckpt::testing::source_dir())
#define CKPTCHECK_BIN (::ckpt::testing::ckptcheck_bin())
