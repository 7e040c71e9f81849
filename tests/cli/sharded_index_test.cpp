// A sharded index (model.safetensors.index.json, pytorch_model.bin.index.json) read as transformers'
// from_pretrained reads it: each name from the shard its weight_map names. A shard's other tensors are
// findings that verify and inspect report with the same code and words, never merged into the
// tensor (that made inspect and diff read two copies as one tensor of twice its bytes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

const std::string kIndexShards =
    std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/hf_sharded_safetensors/";
// Both shards hold model.layers.0.weight and model.embed.weight (DCP's pieces of them); A holds
// optim.state.steps, B model.layers.0.bias.
const std::string kIndexShardA = "shard-00001-model-00001-of-00001.safetensors";
const std::string kIndexShardB = "shard-00002-model-00001-of-00001.safetensors";

std::string index_q(const std::string& s) {
  return "'" + s + "'";
}

// The two shards and an index of `weight_map` beside them: the index's path.
std::string write_index_fixture(const std::string& dir, const nlohmann::json& weight_map,
                                const std::string& name = "model.safetensors.index.json") {
  fs::create_directories(dir);
  for (const std::string& f : {kIndexShardA, kIndexShardB}) fs::copy_file(kIndexShards + f, dir + "/" + f);
  const std::string text =
      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
  write_file_bytes(dir + "/" + name, std::vector<uint8_t>(text.begin(), text.end()));
  return dir + "/" + name;
}

nlohmann::json run_index_json(const std::string& args, int expect_exit) {
  const CommandResult r = run_ckptcheck(args);
  EXPECT_EQ(r.exit_code, expect_exit) << args << ": " << r.output;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

// The findings of one code, as "<file> <tensor>".
std::set<std::string> index_findings(const nlohmann::json& list, const std::string& code) {
  std::set<std::string> out;
  for (const auto& f : list) {
    if (f.value("code", "") != code) continue;
    out.insert(f.value("shard", f.value("file", "")) + " " + f.value("tensor", ""));
  }
  return out;
}

class ShardedIndex : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built"; }
  TempDir scratch_;
};

// The verify conformance suite's index: B's copies are the ones weight_map names, and from_pretrained
// loads B last, so A's copies are never used: warnings; inspect and diff read B's.
TEST_F(ShardedIndex, EachNameIsReadFromTheShardWeightMapNames) {
  const std::string index = write_index_fixture(scratch_ / "m", {{"optim.state.steps", kIndexShardA},
                                                                 {"model.layers.0.weight", kIndexShardB},
                                                                 {"model.embed.weight", kIndexShardB},
                                                                 {"model.layers.0.bias", kIndexShardB}});
  const auto v = run_index_json("verify --json --weights-only " + index_q(index), 0);
  EXPECT_EQ(v["tensors"], 4) << v.dump();
  const std::set<std::string> strays = {kIndexShardA + " model.embed.weight",
                                        kIndexShardA + " model.layers.0.weight"};
  EXPECT_EQ(index_findings(v["warnings"], "chunk_not_in_manifest"), strays) << v.dump();

  const auto j = run_index_json("inspect --json " + index_q(index), 0);
  EXPECT_EQ(index_findings(j["warnings"], "chunk_not_in_manifest"), strays) << j.dump();
  const auto shard_b = run_index_json("inspect --json " + index_q(scratch_ / "m/" + kIndexShardB), 0);
  std::map<std::string, std::string> b_sha;
  for (const auto& t : shard_b["tensors"]) b_sha[t["name"]] = t["sha256"];
  ASSERT_EQ(j["tensors"].size(), 4u) << j.dump();
  for (const auto& t : j["tensors"]) {
    ASSERT_EQ(t["chunks"].size(), 1u) << "one copy per name, never two merged: " << t.dump();
    if (t["name"] == "optim.state.steps") continue;
    EXPECT_EQ(t["sha256"], b_sha[t["name"]]) << "B's copy, as weight_map says: " << t.dump();
    EXPECT_EQ(fs::path(t["chunks"][0]["file"].get<std::string>()).filename(), kIndexShardB) << t.dump();
  }
  // Before, diff summed both copies: "chunks hold 48 bytes, the tensor [3, 4] needs 24", exit 1.
  const CommandResult same = run_ckptcheck("diff " + index_q(index) + " " + index_q(index));
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

// weight_map names A's copy of model.layers.0.weight, but from_pretrained loads B after A and keeps
// B's: the loader and the index disagree, an error in verify and in inspect alike.
TEST_F(ShardedIndex, ACopyTheLoaderTakesOverTheMappedOneFailsVerifyAndInspect) {
  const std::string index = write_index_fixture(scratch_ / "m", {{"optim.state.steps", kIndexShardA},
                                                                 {"model.layers.0.weight", kIndexShardA},
                                                                 {"model.embed.weight", kIndexShardB},
                                                                 {"model.layers.0.bias", kIndexShardB}});
  const auto v = run_index_json("verify --json --weights-only " + index_q(index), 1);
  EXPECT_EQ(index_findings(v["errors"], "reading_ambiguous"),
            std::set<std::string>{kIndexShardB + " model.layers.0.weight"})
      << v.dump();
  EXPECT_EQ(index_findings(v["warnings"], "chunk_not_in_manifest"),
            std::set<std::string>{kIndexShardA + " model.embed.weight"})
      << v.dump();
  std::string message;
  for (const auto& e : v["errors"])
    if (e["code"] == "reading_ambiguous") message = e["message"];
  EXPECT_NE(message.find("weight_map puts in " + kIndexShardA), std::string::npos) << message;
  EXPECT_NE(message.find("the model gets " + kIndexShardB + "'s copy"), std::string::npos) << message;

  const auto j = run_index_json("inspect --json " + index_q(index), 1);
  EXPECT_EQ(index_findings(j["issues"], "reading_ambiguous"),
            std::set<std::string>{kIndexShardB + " model.layers.0.weight"})
      << j.dump();
  EXPECT_EQ(j["tensors"].size(), 4u) << "inspect still lists what the index names: " << j.dump();
}

// A name weight_map puts in a shard that does not hold it: an error naming the index, the tensor,
// the shard, and the shard that does hold it.
TEST_F(ShardedIndex, ANameMappedToAShardWithoutItNamesBoth) {
  const std::string index = write_index_fixture(scratch_ / "m", {{"optim.state.steps", kIndexShardA},
                                                                 {"model.layers.0.weight", kIndexShardB},
                                                                 {"model.embed.weight", kIndexShardB},
                                                                 {"model.layers.0.bias", kIndexShardA}});
  const auto v = run_index_json("verify --json --weights-only " + index_q(index), 1);
  ASSERT_FALSE(v["errors"].empty()) << v.dump();
  EXPECT_EQ(v["errors"][0]["code"], "chunk_missing_in_shard") << v.dump();
  const std::string message = v["errors"][0]["message"];
  for (const std::string& part : {index + ": weight_map puts tensor 'model.layers.0.bias' in " + kIndexShardA,
                                  "; " + kIndexShardB + " holds it"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  for (const std::string& command : {std::string("inspect "), "diff " + index_q(index) + " "}) {
    const CommandResult r = run_ckptcheck(command + index_q(index));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("weight_map puts tensor 'model.layers.0.bias' in " + kIndexShardA),
              std::string::npos)
        << command << r.output;
  }
}

// Names weight_map does not list are not the checkpoint's: warned of, not read.
TEST_F(ShardedIndex, ANameWeightMapDoesNotListIsAWarningAndNotRead) {
  const std::string index = write_index_fixture(
      scratch_ / "m", {{"optim.state.steps", kIndexShardA}, {"model.layers.0.bias", kIndexShardB}});
  const auto v = run_index_json("verify --json --weights-only " + index_q(index), 0);
  EXPECT_EQ(v["tensors"], 2) << v.dump();
  EXPECT_EQ(index_findings(v["warnings"], "chunk_not_in_manifest").size(), 4u) << v.dump();
  const auto j = run_index_json("inspect --json " + index_q(index), 0);
  EXPECT_EQ(j["tensors"].size(), 2u) << j.dump();
  EXPECT_EQ(index_findings(j["warnings"], "chunk_not_in_manifest"),
            index_findings(v["warnings"], "chunk_not_in_manifest"));
}

// A .bin index's shards are torch.save files, opened by their bytes (they were read as safetensors).
TEST_F(ShardedIndex, ABinIndexOpensItsTorchSaveShards) {
  const std::string dir = scratch_ / "bin";
  fs::create_directories(dir);
  const std::string shard = "pytorch_model-00001-of-00001.bin";
  fs::copy_file(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt", dir + "/" + shard);
  const auto listed = run_index_json("inspect --json " + index_q(dir + "/" + shard), 0);
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& t : listed["tensors"]) weight_map[t["name"].get<std::string>()] = shard;
  ASSERT_FALSE(weight_map.empty());
  const std::string text = nlohmann::json{{"weight_map", weight_map}}.dump();
  const std::string index = dir + "/pytorch_model.bin.index.json";
  write_file_bytes(index, std::vector<uint8_t>(text.begin(), text.end()));
  const auto v = run_index_json("verify --json --weights-only " + index_q(index), 0);
  EXPECT_EQ(v["tensors"], weight_map.size()) << v.dump();
  const auto j = run_index_json("inspect --json " + index_q(index), 0);
  EXPECT_EQ(j["tensors"].size(), weight_map.size()) << j.dump();
}

}  // namespace
}  // namespace ckpt
