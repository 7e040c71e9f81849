// `ckptcheck inspect` through the real binary: the PyTorch fixtures' hashes, refusal of malicious
// pickles, --tensor, --stats and a damaged chunk. Skipped when build/ckptcheck is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "formats/safetensors_file.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

const std::string kPytorchDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch";

nlohmann::json parse_output(const CommandResult& r) {
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

const nlohmann::json* find_tensor(const nlohmann::json& report, const std::string& name) {
  for (const auto& t : report["tensors"]) {
    if (t["name"] == name) return &t;
  }
  return nullptr;
}

class InspectCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(CKPTCHECK_BIN, X_OK) != 0) GTEST_SKIP() << CKPTCHECK_BIN << " is not built";
  }
};

TEST_F(InspectCommandTest, PytorchFixturesMatchExpectedHashes) {
  std::ifstream in(kPytorchDir + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  for (const auto& [file, tensors] : expected["files"].items()) {
    const CommandResult r = run_ckptcheck("inspect --json '" + kPytorchDir + "/" + file + "'");
    ASSERT_EQ(r.exit_code, 0) << file << ": " << r.output;
    const auto report = parse_output(r);
    EXPECT_EQ(report["kind"], "pytorch");
    EXPECT_EQ(report["tensors"].size(), tensors.size()) << file;
    for (const auto& want : tensors) {
      const nlohmann::json* got = find_tensor(report, want["name"]);
      ASSERT_NE(got, nullptr) << file << ": " << want["name"];
      EXPECT_EQ((*got)["sha256"], want["sha256"]) << want["name"];
      EXPECT_EQ((*got)["dtype"], want["dtype"]) << want["name"];
      EXPECT_EQ((*got)["shape"], want["shape"]) << want["name"];
    }
  }
}

TEST_F(InspectCommandTest, MaliciousPicklesAreRefusedNamingTheGlobal) {
  std::ifstream in(kPytorchDir + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  for (const auto& [file, global] : expected["malicious"].items()) {
    const CommandResult r = run_ckptcheck("inspect '" + kPytorchDir + "/" + file + "'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(global.get<std::string>()), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("not supported"), std::string::npos) << r.output;
  }
}

TEST_F(InspectCommandTest, CheckpointListsTensorsAndMetadata) {
  TempDir root;
  auto state = full_training_state();
  const std::string dir = save_training_state(root.path(), state);
  const CommandResult r = run_ckptcheck("inspect --json '" + dir + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = parse_output(r);
  EXPECT_EQ(report["metadata"]["step"], kFixtureStep);
  EXPECT_EQ(report["metadata"]["shards"].size(), 3u);
  EXPECT_EQ(report["tensors"].size(), state.size());
  const nlohmann::json* w = find_tensor(report, "model.blocks.0.w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ((*w)["component"], "model");
  EXPECT_EQ((*w)["bytes"], 32 * 16 * 4);
  EXPECT_GT((*w)["chunks"].size(), 1u);
  const nlohmann::json* step = find_tensor(report, "progress.global_step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ((*step)["sha256"], sha256_hex(find_state_tensor(state, "progress.global_step")->bytes.data(), 8));

  const CommandResult table = run_ckptcheck("inspect '" + root.path() + "'");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_EQ(table.output.rfind("OK ", 0), 0u) << table.output;
  EXPECT_NE(table.output.find("optimizer.model.blocks.0.w.exp_avg_sq"), std::string::npos) << table.output;
}

TEST_F(InspectCommandTest, TensorFlagRestrictsAndSuggestsCloseNames) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const CommandResult one = run_ckptcheck("inspect --json --tensor scaler.scale '" + dir + "'");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto report = parse_output(one);
  ASSERT_EQ(report["tensors"].size(), 1u);
  EXPECT_EQ(report["tensors"][0]["name"], "scaler.scale");

  const CommandResult typo = run_ckptcheck("inspect --tensor scaler.scal '" + dir + "'");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("'scaler.scal'"), std::string::npos) << typo.output;
  EXPECT_NE(typo.output.find("did you mean: scaler.scale"), std::string::npos) << typo.output;
}

TEST_F(InspectCommandTest, StatsAreHandChecked) {
  TempDir dir;
  const float w[4] = {1, -2, 3, NAN};
  const uint16_t bf16[2] = {0x3FC0, 0xBF00};  // 1.5, -0.5
  ASSERT_TRUE(write_safetensors_file(dir / "s.safetensors",
                                     {{{"model.w", "model", DType::kF32, {2, 2}, {0, 0}, {2, 2}, 0, 16, ""},
                                       reinterpret_cast<const uint8_t*>(w)},
                                      {{"model.h", "model", DType::kBF16, {2}, {0}, {2}, 0, 4, ""},
                                       reinterpret_cast<const uint8_t*>(bf16)}},
                                     {{"step", 7}})
                  .is_ok());
  const CommandResult r = run_ckptcheck("inspect --json --stats '" + dir / "s.safetensors" + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = parse_output(r);
  EXPECT_EQ(report["metadata"]["step"], 7);
  const auto& s = (*find_tensor(report, "model.w"))["stats"];
  EXPECT_EQ(s["min"], -2.0);
  EXPECT_EQ(s["max"], 3.0);
  EXPECT_DOUBLE_EQ(s["mean"].get<double>(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s["l2_norm"].get<double>(), std::sqrt(14.0));
  EXPECT_EQ(s["nan"], 1);
  EXPECT_EQ(s["inf"], 0);
  const auto& h = (*find_tensor(report, "model.h"))["stats"];
  EXPECT_EQ(h["mean"], 0.5);
  EXPECT_EQ(h["min"], -0.5);

  const CommandResult table = run_ckptcheck("inspect --stats '" + dir / "s.safetensors" + "'");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("min -2 max 3 mean 0.667 l2 3.74 nan 1 inf 0"), std::string::npos)
      << table.output;
}

TEST_F(InspectCommandTest, FlippedPayloadByteExitsOneWithChunkAndHashes) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const ManifestChunk chunk = fixture_chunk(dir, "optimizer.model.blocks.0.w.exp_avg", 0);
  const std::string shard = fixture_shard_path(dir, chunk.shard);
  auto bytes = read_file_bytes(shard);
  bytes[chunk.data_offset] ^= 1;
  write_file_bytes(shard, bytes);
  const std::string damaged = sha256_hex(bytes.data() + chunk.data_offset, chunk.data_bytes);
  const CommandResult r = run_ckptcheck("inspect '" + dir + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("FAIL ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("optimizer.model.blocks.0.w.exp_avg[0:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stored " + chunk.sha256), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("computed " + damaged), std::string::npos) << r.output;
}

TEST_F(InspectCommandTest, MissingPathExitsTwo) {
  TempDir root;
  EXPECT_EQ(run_ckptcheck("inspect '" + root / "absent.safetensors" + "'").exit_code, 2);
  EXPECT_EQ(run_ckptcheck("inspect").exit_code, 2);
}

}  // namespace
}  // namespace ckpt
