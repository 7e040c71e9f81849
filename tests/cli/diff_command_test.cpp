// `ckptcheck diff` through the real binary: shardings and formats do not matter, a real difference
// is found with its first index, tolerances and one-sided tensors. Skipped when not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "formats/hdf5_file.h"
#include "formats/safetensors_file.h"
#include "tests/support/test_paths.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class DiffCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
  CommandResult diff(const std::string& a, const std::string& b, const std::string& flags = "--json") {
    return run_ckptcheck("diff " + flags + " '" + a + "' '" + b + "'");
  }
  TempDir root_a_, root_b_;
};

TEST_F(DiffCommandTest, SameStateInDifferentShardingsIsIdentical) {
  const auto state = full_training_state();
  const std::string a = save_training_state(root_a_.path(), state, kFixtureStep, 3);
  const std::string b = save_training_state(root_b_.path(), state, kFixtureStep, 1);
  const CommandResult r = diff(a, b);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(j["identical"].get<bool>());
  EXPECT_EQ(j["components"].size(), 7u);  // model optimizer scheduler scaler rng data progress
  EXPECT_TRUE(j["components"]["optimizer"]["bit_identical"].get<bool>());
  const CommandResult table = diff(a, b, "");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_EQ(table.output.rfind("SAME ", 0), 0u) << table.output;
}

TEST_F(DiffCommandTest, RealDifferenceIsFoundWithItsFirstIndex) {
  auto state = full_training_state();
  const std::string a = save_training_state(root_a_.path(), state);
  LoadedTensor* w = find_state_tensor(state, "optimizer.model.blocks.0.w.exp_avg");
  float v;
  for (int64_t flat : {3 * 16 + 5, 20 * 16 + 1}) {  // [3, 5] first, then a larger change at [20, 1]
    std::memcpy(&v, w->bytes.data() + flat * 4, 4);
    v += flat == 3 * 16 + 5 ? 0.25f : 0.5f;
    std::memcpy(w->bytes.data() + flat * 4, &v, 4);
  }
  const std::string b = save_training_state(root_b_.path(), state);
  const CommandResult r = diff(a, b);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_FALSE(j["identical"].get<bool>());
  EXPECT_TRUE(j["components"]["model"]["passed"].get<bool>());
  const auto& opt = j["components"]["optimizer"];
  EXPECT_FALSE(opt["passed"].get<bool>());
  ASSERT_EQ(opt["tensors_differing"].size(), 1u);
  const auto& t = opt["tensors_differing"][0];
  EXPECT_EQ(t["tensor"], "optimizer.model.blocks.0.w.exp_avg");
  EXPECT_EQ(t["first_index"], (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(t["max_abs_index"], (std::vector<int64_t>{20, 1}));
  EXPECT_NEAR(t["max_abs"].get<double>(), 0.5, 1e-6);
  EXPECT_EQ(t["differing_elements"], 2);

  const CommandResult table = diff(a, b, "");
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_NE(table.output.find("first at [3, 5]"), std::string::npos) << table.output;
  EXPECT_EQ(diff(a, b, "--atol 0.6").exit_code, 0) << "within tolerance";
  EXPECT_EQ(diff(a, b, "--atol 0.3").exit_code, 1);
}

TEST_F(DiffCommandTest, TensorsOnOneSideAreListed) {
  auto state = full_training_state();
  const std::string a = save_training_state(root_a_.path(), state);
  drop_state_tensor(state, "scaler.growth_tracker");
  const std::string b = save_training_state(root_b_.path(), state);
  const CommandResult r = diff(a, b, "");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("scaler.growth_tracker: only in A"), std::string::npos) << r.output;
  const CommandResult reversed = diff(b, a, "");
  EXPECT_NE(reversed.output.find("scaler.growth_tracker: only in B"), std::string::npos) << reversed.output;
}

TEST_F(DiffCommandTest, SafetensorsFileAgainstHdf5FileAcrossChunkings) {
  const float values[6] = {1, 2, 3, 4, 5, 6};
  const auto* bytes = reinterpret_cast<const uint8_t*>(values);
  ASSERT_TRUE(write_safetensors_file(
                  root_a_ / "w.safetensors",
                  {{{"model.w", "model", DType::kF32, {3, 2}, {0, 0}, {3, 2}, 0, 24, ""}, bytes}}, {})
                  .is_ok());
  ASSERT_TRUE(
      write_hdf5_file(root_b_ / "w.h5",
                      {{{"model.w", "model", DType::kF32, {3, 2}, {0, 0}, {1, 2}, 0, 8, ""}, bytes},
                       {{"model.w", "model", DType::kF32, {3, 2}, {1, 0}, {2, 2}, 0, 16, ""}, bytes + 8}},
                      {})
          .is_ok());
  const CommandResult r = diff(root_a_ / "w.safetensors", root_b_ / "w.h5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// diff knows two tensors equal by their chunks' digests without reading them twice; a chunk whose
// bytes contradict its recorded hash is corruption all the same, even when both sides were damaged
// alike and their digests agree.
TEST_F(DiffCommandTest, AChunkDamagedAlikeOnBothSidesIsStillCorruption) {
  const auto state = full_training_state();
  const std::string a = save_training_state(root_a_.path(), state);
  const std::string b = save_training_state(root_b_.path(), state);
  const std::string tensor = "optimizer.model.blocks.0.w.exp_avg";
  const ManifestChunk chunk = fixture_chunk(a, tensor, 0);
  ASSERT_EQ(diff(a, b).exit_code, 0) << "two saves of one state are identical";
  const auto flip = [&](const std::string& dir) {
    const std::string shard = dir + "/" + read_fixture_manifest(dir).shards[chunk.shard].path;
    auto bytes = read_file_bytes(shard);
    bytes[chunk.data_offset] ^= 1;
    write_file_bytes(shard, bytes);
  };
  flip(b);
  const CommandResult one = diff(a, b, "");
  EXPECT_EQ(one.exit_code, 1) << one.output;  // a failed check, as a damaged chunk always was
  EXPECT_NE(one.output.find("sha256 mismatch for " + tensor), std::string::npos) << one.output;
  flip(a);
  const CommandResult both = diff(a, b, "");
  EXPECT_EQ(both.exit_code, 1) << both.output;
  EXPECT_NE(both.output.find("sha256 mismatch for " + tensor), std::string::npos) << both.output;
}

TEST_F(DiffCommandTest, UnreadableSideExitsTwo) {
  const std::string a = save_training_state(root_a_.path(), full_training_state());
  EXPECT_EQ(diff(a, root_b_ / "nope").exit_code, 2);
  EXPECT_EQ(run_ckptcheck("diff --rtol -1 '" + a + "' '" + a + "'").exit_code, 2);
}

}  // namespace
}  // namespace ckpt
