// The SHA-256 kernel on the trust path, as a user drives it: --sha256 and CKPTCHECK_SHA256 force
// OpenSSL, a value that means nothing is refused (exit 2) before anything is hashed, and --version,
// verify --json and the pins name the kernel that ran. Both kernels give the same verdict and digests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class Sha256KernelCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built (make build)";
    dir_ = save_training_state(root_.path(), full_training_state());
  }
  nlohmann::json verify_json(const std::string& env, const std::string& flags) {
    const CommandResult r = run_command(env + " '" + std::string(CKPTCHECK_BIN) + "' verify --json " + flags +
                                        " '" + dir_ + "' 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  }
  TempDir root_;
  std::string dir_;
};

TEST_F(Sha256KernelCommand, OpenSslIsForcedByFlagOrEnvironmentAndNamed) {
  const auto automatic = verify_json("", "");
  const auto by_env = verify_json("CKPTCHECK_SHA256=openssl", "");
  const auto by_flag = verify_json("", "--sha256 openssl");
  EXPECT_EQ(by_env["sha256_kernel"], "openssl (forced by CKPTCHECK_SHA256)") << by_env.dump();
  EXPECT_EQ(by_flag["sha256_kernel"], "openssl (forced by --sha256 openssl)") << by_flag.dump();
  EXPECT_NE(automatic["sha256_kernel"].get<std::string>().find(" "), std::string::npos) << automatic.dump();
  for (const auto* j : {&by_env, &by_flag}) {
    EXPECT_EQ((*j)["ok"], true);
    EXPECT_EQ((*j)["bytes_hashed"], automatic["bytes_hashed"]);
  }
  // The flag overrides the environment.
  EXPECT_NE(verify_json("CKPTCHECK_SHA256=openssl", "--sha256 auto")["sha256_kernel"],
            "openssl (forced by CKPTCHECK_SHA256)");
}

TEST_F(Sha256KernelCommand, AValueThatMeansNothingIsRefused) {
  CommandResult r =
      run_command("CKPTCHECK_SHA256=fast '" + std::string(CKPTCHECK_BIN) + "' verify '" + dir_ + "' 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("CKPTCHECK_SHA256=\"fast\""), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run_ckptcheck("verify --sha256 fast '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST_F(Sha256KernelCommand, VersionAndPinsNameTheKernel) {
  CommandResult r = run_command("CKPTCHECK_SHA256=openssl '" + std::string(CKPTCHECK_BIN) + "' --version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sha256          openssl (forced by CKPTCHECK_SHA256)"), std::string::npos)
      << r.output;
  r = run_ckptcheck("pin --json --config '" + std::string(CKPTCHECK_SOURCE_DIR) +
                    "/fixtures/configs/pilot.yaml'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto pins = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(pins.is_discarded()) << r.output;
  EXPECT_TRUE(pins.dump().find("\"sha256_kernel\"") != std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
