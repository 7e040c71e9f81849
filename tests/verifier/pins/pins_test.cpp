#include "verifier/pins/pins.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_support.h"
#include "verifier/train/config_pins.h"

namespace ckpt {
namespace {

PinInputs hand_made_inputs(const std::string& data_file) {
  PinInputs inputs;
  inputs.resolved_config = {{"name", "pilot"}, {"seed", 42}, {"optimizer", {{"lr", 0.003}}}};
  inputs.model = {{"architecture", "decoder-lm"}, {"d_model", 64}, {"seed", 42}, {"seq_len", 64}};
  inputs.data_files = {data_file};
  inputs.preprocessing = {{"eval_fraction", 0.1}, {"shuffle_seed", 1234}, {"seq_len", 64}};
  inputs.seeds = {{"seed", 42}, {"data.shuffle_seed", 1234}};
  return inputs;
}

TEST(Pins, CanonicalJsonSortsKeysAtEveryDepth) {
  nlohmann::json a;
  a["b"] = 1;
  a["a"] = {{"z", 1}, {"y", 2}};
  EXPECT_EQ(canonical_json(a), R"({"a":{"y":2,"z":1},"b":1})");
}

TEST(Pins, ConfigShaIgnoresKeyOrderButNotValues) {
  testing::TempDir dir;
  PinInputs one = hand_made_inputs(dir.write("corpus.txt", "abc"));
  PinInputs two = one;
  two.resolved_config = nlohmann::json::object();
  two.resolved_config["optimizer"] = {{"lr", 0.003}};
  two.resolved_config["seed"] = 42;
  two.resolved_config["name"] = "pilot";
  EXPECT_EQ(config_sha256(one), config_sha256(two));
  two.resolved_config["optimizer"]["lr"] = 0.004;
  EXPECT_NE(config_sha256(one), config_sha256(two));
}

TEST(Pins, ModelRevisionCoversHyperparametersAndInitialWeights) {
  testing::TempDir dir;
  PinInputs inputs = hand_made_inputs(dir.write("corpus.txt", "abc"));
  const std::string base = *model_revision(inputs);
  PinInputs wider = inputs;
  wider.model["d_model"] = 128;
  EXPECT_NE(*model_revision(wider), base);

  inputs.initial_weights = dir.write("init.bin", "weights v1");
  const std::string with_weights = *model_revision(inputs);
  EXPECT_NE(with_weights, base);
  dir.write("init.bin", "weights v2");
  EXPECT_NE(*model_revision(inputs), with_weights);

  inputs.initial_weights = dir.path() + "/absent.bin";
  auto missing = model_revision(inputs);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("absent.bin"), std::string::npos) << missing.status().message();
}

TEST(Pins, DatasetRevisionFollowsBytesAndPreprocessingNotTheDirectory) {
  testing::TempDir dir;
  const std::string here = dir.write("corpus.txt", "hello world");
  std::filesystem::create_directory(dir.path() + "/elsewhere");
  const std::string there = dir.write("elsewhere/corpus.txt", "hello world");
  const std::string base = *dataset_revision(hand_made_inputs(here));
  EXPECT_EQ(*dataset_revision(hand_made_inputs(there)), base);

  PinInputs split = hand_made_inputs(here);
  split.preprocessing["eval_fraction"] = 0.2;
  EXPECT_NE(*dataset_revision(split), base);

  dir.write("corpus.txt", "hello World");
  EXPECT_NE(*dataset_revision(hand_made_inputs(here)), base);
  EXPECT_FALSE(dataset_revision(hand_made_inputs(dir.path() + "/absent.txt")).is_ok());
}

TEST(Pins, DependenciesNameEveryLibrary) {
  const nlohmann::json deps = dependency_versions(TorchFacts{"1.13.0", false});
  EXPECT_EQ(deps["libtorch"], "1.13.0");
  EXPECT_EQ(deps["cuda_runtime"], "none");
  EXPECT_EQ(deps["cuda_driver"], "none");
  for (const char* name : {"hdf5", "zstd", "openssl", "yaml-cpp", "compiler", "libc"}) {
    ASSERT_TRUE(deps.contains(name)) << name;
    EXPECT_FALSE(deps[name].get<std::string>().empty()) << name;
  }
  EXPECT_EQ(deps["openssl"].get<std::string>().rfind("OpenSSL", 0), 0u);
  EXPECT_EQ(deps["libc"].get<std::string>().rfind("glibc ", 0), 0u);
}

TEST(Pins, ComputePinsHasEveryFieldAndFailsOnUnreadableData) {
  testing::TempDir dir;
  const PinInputs inputs = hand_made_inputs(dir.write("corpus.txt", "abc"));
  auto pins = compute_pins(inputs, TorchFacts{"1.13.0", false});
  ASSERT_TRUE(pins.is_ok()) << pins.status().to_string();
  EXPECT_EQ((*pins)["model_revision"], *model_revision(inputs));
  EXPECT_EQ((*pins)["dataset_revision"], *dataset_revision(inputs));
  EXPECT_EQ((*pins)["config_sha256"], config_sha256(inputs));
  EXPECT_EQ((*pins)["seeds"]["seed"], 42);
  EXPECT_EQ((*pins)["dependencies"]["libtorch"], "1.13.0");
  EXPECT_EQ((*pins)["container_fingerprint"]["inputs"]["threads"], 1);
  EXPECT_EQ((*pins)["container_fingerprint"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_FALSE(compute_pins(hand_made_inputs(dir.path() + "/gone.txt"), TorchFacts{"1.13.0", false}).is_ok());
}

TEST(Pins, InputsOfAConfigTakeTheModelDataAndSeeds) {
  PilotConfig config;
  config.model.d_model = 96;
  config.seed = 7;
  config.seq_len = 32;
  config.data.path = "/data/corpus.txt";
  config.data.eval_fraction = 0.25;
  config.data.shuffle_seed = 99;
  config.threads = 3;
  const PinInputs inputs = pin_inputs_of(config, "init.bin");
  EXPECT_EQ(inputs.model["d_model"], 96);
  EXPECT_EQ(inputs.model["seed"], 7);
  EXPECT_EQ(inputs.model["seq_len"], 32);
  EXPECT_EQ(inputs.initial_weights, "init.bin");
  EXPECT_EQ(inputs.data_files, std::vector<std::string>{"/data/corpus.txt"});
  EXPECT_EQ(inputs.preprocessing["eval_fraction"], 0.25);
  EXPECT_EQ(inputs.seeds, nlohmann::json({{"seed", 7}, {"data.shuffle_seed", 99}}));
  EXPECT_EQ(inputs.threads, 3);
}

TEST(Pins, FieldsAreDottedAndTableListsThem) {
  const nlohmann::json pins = {{"a", "x"}, {"deps", {{"libtorch", "1.13.0"}, {"files", {1, 2}}}}};
  const auto fields = pin_fields(pins);
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields.at("deps.libtorch"), "1.13.0");
  EXPECT_EQ(fields.at("deps.files"), nlohmann::json({1, 2}));
  EXPECT_EQ(pins_table(pins), "a              x\ndeps.files     [1,2]\ndeps.libtorch  1.13.0\n");
}

}  // namespace
}  // namespace ckpt
