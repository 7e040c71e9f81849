// The commands agree on what a path is (layouts/layout_registry.h): every registered layout's
// fixture (tests/support/layout_fixtures.h) that verify accepts, inspect and diff open as the same
// checkpoint, and a path two layouts claim is refused by each of them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/layout_fixtures.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

TEST(LayoutRegistryCommands, InspectAndDiffOpenEveryFolderVerifyAccepts) {
  ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built";
  TempDir scratch;
  int n = 0;
  for (const LayoutFixture& f : layout_fixtures()) {
    const std::string dir = scratch / std::to_string(n++);
    fs::create_directories(dir);
    const std::string path = f.make(dir);
    if (f.needs_seal) {
      const CommandResult sealed = run_ckptcheck("seal " + quoted(path));
      ASSERT_EQ(sealed.exit_code, 0) << sealed.output;
    }
    const CommandResult verified = run_ckptcheck("verify --json " + f.verify_args + " " + quoted(path));
    ASSERT_EQ(verified.exit_code, 0) << path << ": " << verified.output;
    const auto v = nlohmann::json::parse(verified.output, nullptr, false);
    EXPECT_EQ(v.value("kind", ""), f.kind) << verified.output;
    const CommandResult listed = run_ckptcheck("inspect --json " + quoted(path));
    ASSERT_EQ(listed.exit_code, 0) << f.layout << " " << path << ": " << listed.output;
    const auto j = nlohmann::json::parse(listed.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << listed.output;
    EXPECT_FALSE(j.value("tensors", nlohmann::json::array()).empty()) << path << ": " << listed.output;
    const CommandResult same = run_ckptcheck("diff " + quoted(path) + " " + quoted(path));
    EXPECT_EQ(same.exit_code, 0) << f.layout << " " << path << ": " << same.output;
  }
}

TEST(LayoutRegistryCommands, APathTwoLayoutsClaimIsRefusedByEveryCommand) {
  TempDir scratch;
  const std::string dir = scratch / "torch113";
  fs::copy(layout_data("dcp/torch113"), dir, fs::copy_options::recursive);
  write_file_bytes(dir + "/trainer_state.json", {'{', '}'});
  const CommandResult verified = run_ckptcheck("verify --json --weights-only " + quoted(dir));
  EXPECT_EQ(verified.exit_code, 1) << verified.output;
  EXPECT_NE(verified.output.find("reading_ambiguous"), std::string::npos) << verified.output;
  EXPECT_NE(verified.output.find("hf_trainer (trainer_state.json)"), std::string::npos) << verified.output;
  for (const std::string command : {std::string("inspect "), "diff " + quoted(dir) + " "}) {
    const CommandResult r = run_ckptcheck(command + quoted(dir));
    EXPECT_NE(r.exit_code, 0) << command << r.output;
    EXPECT_NE(r.output.find("claimed by two layouts, dcp (.metadata) and hf_trainer (trainer_state.json)"),
              std::string::npos)
        << command << r.output;
  }
}

}  // namespace
}  // namespace ckpt
