// `ckptcheck inspect` through the real binary: the PyTorch fixtures' hashes, malicious pickles read
// inertly with their globals flagged, --tensor, --stats and a damaged chunk. Skipped when build/ckptcheck is
// not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "base/sha256.h"
#include "formats/pytorch_file.h"
#include "formats/safetensors_file.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
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
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
};

TEST_F(InspectCommandTest, PytorchFixturesMatchExpectedHashes) {
  std::ifstream in(kPytorchDir + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  for (const auto& [file, listed] : expected["files"].items()) {
    nlohmann::json tensors = listed;  // plus the numpy arrays the same file holds
    for (const auto& t : expected["numpy"].value(file, nlohmann::json::array())) tensors.push_back(t);
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

TEST_F(InspectCommandTest, MaliciousPicklesAreReadInertlyAndTheirGlobalsCalledOut) {
  // Each fixture would touch the sentinel under torch.load(weights_only=False): os.system, eval,
  // exec, subprocess.check_call.
  ::unlink("/tmp/ckptcheck_fixture_was_executed");
  std::ifstream in(kPytorchDir + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  ASSERT_EQ(expected["malicious"].size(), 4u);
  for (const auto& [file, global] : expected["malicious"].items()) {
    const CommandResult r = run_ckptcheck("inspect '" + kPytorchDir + "/" + file + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("dangerous " + global.get<std::string>()), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("WARNING: " + kPytorchDir + "/" + file + " names dangerous global '" +
                            global.get<std::string>() + "'"),
              std::string::npos)
        << r.output;
    const CommandResult j = run_ckptcheck("inspect --json '" + kPytorchDir + "/" + file + "'");
    ASSERT_EQ(j.exit_code, 0) << j.output;
    const auto report = parse_output(j);
    bool listed = false;
    for (const auto& g : report["pickle_globals"])
      listed = listed || (g["name"] == global && g["risk"] == "dangerous");
    EXPECT_TRUE(listed) << report["pickle_globals"].dump();
    EXPECT_NE(find_tensor(report, "weight"), nullptr);
  }
  EXPECT_FALSE(path_exists("/tmp/ckptcheck_fixture_was_executed"));
}

TEST_F(InspectCommandTest, LegacyAndTensorlessFilesAreDescribed) {
  const CommandResult legacy = run_ckptcheck("inspect '" + kPytorchDir + "/legacy_model_state.pt'");
  EXPECT_EQ(legacy.exit_code, 0) << legacy.output;
  EXPECT_NE(legacy.output.find("half_weight"), std::string::npos) << legacy.output;
  const CommandResult args = run_ckptcheck("inspect --json '" + kPytorchDir + "/training_args.bin'");
  ASSERT_EQ(args.exit_code, 0) << args.output;
  const auto report = parse_output(args);
  EXPECT_TRUE(report["tensors"].empty());
  EXPECT_EQ(report["metadata"]["value"]["__class__"], "transformers.training_args.TrainingArguments");
  EXPECT_EQ(report["pickle_globals"][0]["risk"], "executes");
}

TEST_F(InspectCommandTest, FlippedStorageByteInATorchSaveZipFailsItsCrc) {
  testing::TempDir dir;
  std::ifstream in(kPytorchDir + "/model_state.pt", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto clean = open_pytorch_file(kPytorchDir + "/model_state.pt");
  ASSERT_TRUE(clean.is_ok()) << clean.status().to_string();
  bytes[(*clean)->chunks()[0].data_offset + 2] ^= 0x10;  // a weight's byte: no hash records it, the CRC does
  const CommandResult r = run_ckptcheck("inspect '" + dir.write("m.pt", bytes) + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // The finding names the tensor stored in the damaged member (issue 65).
  EXPECT_NE(r.output.find("[zip_crc_mismatch] m.pt " + (*clean)->chunks()[0].name + ": "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("CRC-32 mismatch"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("zip member 'model_state/data/"), std::string::npos) << r.output;
}

TEST_F(InspectCommandTest, GitLfsPointerIsNamed) {
  testing::TempDir dir;
  const std::string path =
      dir.write("model.safetensors", "version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 10\n");
  const CommandResult r = run_ckptcheck("inspect '" + path + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("a Git LFS pointer, not the file: run `git lfs pull`"), std::string::npos)
      << r.output;
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
  const float not_finite[2] = {INFINITY, NAN};
  ASSERT_TRUE(write_safetensors_file(dir / "s.safetensors",
                                     {{{"model.w", "model", DType::kF32, {2, 2}, {0, 0}, {2, 2}, 0, 16, ""},
                                       reinterpret_cast<const uint8_t*>(w)},
                                      {{"model.h", "model", DType::kBF16, {2}, {0}, {2}, 0, 4, ""},
                                       reinterpret_cast<const uint8_t*>(bf16)},
                                      {{"model.n", "model", DType::kF32, {2}, {0}, {2}, 0, 8, ""},
                                       reinterpret_cast<const uint8_t*>(not_finite)}},
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
  // No finite element: min, max, mean and L2 (of the finite elements) were not measured, never 0.
  const auto& n = (*find_tensor(report, "model.n"))["stats"];
  for (const char* field : {"min", "max", "mean", "l2_norm"})
    EXPECT_TRUE(n[field].is_null()) << field << n.dump();
  EXPECT_EQ(n["nan"], 1);
  EXPECT_EQ(n["inf"], 1);

  const CommandResult table = run_ckptcheck("inspect --stats '" + dir / "s.safetensors" + "'");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("min -2 max 3 mean 0.667 l2 3.74 nan 1 inf 0"), std::string::npos)
      << table.output;
  EXPECT_NE(table.output.find("min, max, mean, l2 not measured (no finite element of 2) nan 1 inf 1"),
            std::string::npos)
      << table.output;
}

TEST_F(InspectCommandTest, FlippedPayloadByteExitsOneWithChunkAndHashes) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const ManifestChunk chunk = fixture_chunk(dir, "optimizer.model.blocks.0.w.exp_avg", 0);
  const auto payload = flip_chunk_payload_byte(dir, "optimizer.model.blocks.0.w.exp_avg", 0, 0, 1);
  const std::string damaged = sha256_hex(payload.data(), payload.size());
  const CommandResult r = run_ckptcheck("inspect '" + dir + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("FAIL ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("optimizer.model.blocks.0.w.exp_avg[0:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("expected " + digest_hex(chunk.sha256)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("got " + damaged), std::string::npos) << r.output;
}

TEST_F(InspectCommandTest, MissingPathExitsTwo) {
  TempDir root;
  EXPECT_EQ(run_ckptcheck("inspect '" + root / "absent.safetensors" + "'").exit_code, 2);
  EXPECT_EQ(run_ckptcheck("inspect").exit_code, 2);
}

}  // namespace
}  // namespace ckpt
