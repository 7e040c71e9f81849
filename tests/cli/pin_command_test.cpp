#include "verifier/cli/pin_command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

struct Outcome {
  int exit_code;
  std::string out;
};

// Runs `pin` in-process with a fake config loader that pins one corpus file.
Outcome run_pin(const std::string& corpus, std::vector<std::string> args, bool loader_fails = false) {
  PinEnvironment environment;
  environment.load_inputs = [=](const std::string& path) -> Result<PinInputs> {
    if (loader_fails) return Status::invalid_argument(path + ": model.d_model: expected an integer > 0");
    PinInputs inputs;
    inputs.resolved_config = {{"source", path}};
    inputs.model = {{"architecture", "decoder-lm"}};
    inputs.data_files = {corpus};
    inputs.preprocessing = {{"eval_fraction", 0.1}};
    inputs.seeds = {{"seed", 42}};
    return inputs;
  };
  environment.torch = TorchFacts{"1.13.0", false};
  auto command = make_pin_command(std::move(environment));
  CLI::App app;
  command->add_to(app);
  args.insert(args.begin(), "pin");
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  app.parse(reversed);
  ::testing::internal::CaptureStdout();
  const int rc = command->run();
  return {rc, ::testing::internal::GetCapturedStdout()};
}

TEST(PinCommand, PrintsJsonAndWritesTheSameToOut) {
  testing::TempDir dir;
  const std::string corpus = dir.write("corpus.txt", "abc");
  const std::string out_path = dir.path() + "/pins.json";
  const Outcome r = run_pin(corpus, {"--config", "pilot.yaml", "--json", "--out", out_path});
  ASSERT_EQ(r.exit_code, 0);
  const auto printed = nlohmann::json::parse(r.out);
  std::ifstream in(out_path);
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_EQ(nlohmann::json::parse(written.str()), printed);
  EXPECT_EQ(printed["dependencies"]["libtorch"], "1.13.0");
  EXPECT_EQ(printed["seeds"]["seed"], 42);
  EXPECT_EQ(printed["dataset_revision"].get<std::string>().size(), 64u);
}

TEST(PinCommand, TableByDefaultAndInitialWeightsChangeTheModelRevision) {
  testing::TempDir dir;
  const std::string corpus = dir.write("corpus.txt", "abc");
  const Outcome table = run_pin(corpus, {"--config", "pilot.yaml"});
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("dependencies.libtorch"), std::string::npos);
  EXPECT_NE(table.out.find("model_revision"), std::string::npos);

  const auto plain = nlohmann::json::parse(run_pin(corpus, {"--config", "p.yaml", "--json"}).out);
  const std::string weights = dir.write("init.bin", "w");
  const auto seeded = nlohmann::json::parse(
      run_pin(corpus, {"--config", "p.yaml", "--json", "--initial-weights", weights}).out);
  EXPECT_NE(plain["model_revision"], seeded["model_revision"]);
  EXPECT_EQ(plain["config_sha256"], seeded["config_sha256"]);
}

TEST(PinCommand, BadConfigOrUnreadableDataExitsTwo) {
  testing::TempDir dir;
  const std::string corpus = dir.write("corpus.txt", "abc");
  EXPECT_EQ(run_pin(corpus, {"--config", "bad.yaml"}, /*loader_fails=*/true).exit_code, kExitUsage);
  EXPECT_EQ(run_pin(dir.path() + "/absent.txt", {"--config", "pilot.yaml"}).exit_code, kExitUsage);
  const std::string out_path = dir.path() + "/no-such-dir/pins.json";
  EXPECT_EQ(run_pin(corpus, {"--config", "pilot.yaml", "--out", out_path}).exit_code, kExitUsage);
}

TEST(PinCommand, BinaryRejectsAMissingConfigWithExitTwo) {
  const std::string cmd =
      std::string(CKPTCHECK_BIN) + " pin --config /nonexistent/pilot.yaml >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace ckpt
