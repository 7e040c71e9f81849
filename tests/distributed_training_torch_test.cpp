// Multi-rank training and resharding with real processes on loopback (`ckptcheck launch`, which
// picks a free port per run). Every resharding test resumes a checkpoint in another world size
// (or strategy), lets the new ranks save it again at the same step, and compares the two
// checkpoints' reassembled tensors byte for byte: the new ranks' state, gathered through the
// checkpoint, equals the original exactly.
#include <gtest/gtest.h>

#include <map>

#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "shards/manifest.h"
#include "test_support.h"

namespace ckpt {
namespace {

using testing::run_ckptcheck;
using testing::TempDir;

std::string config(const std::string& strategy) {
  return std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs/pilot-" + strategy + ".yaml";
}

// `train` with P ranks (P = 0: a plain process, no torchrun variables).
testing::CommandResult train(int nproc, const std::string& strategy, const std::string& args) {
  const std::string train_args = "train --config " + config(strategy) + " " + args;
  if (nproc == 0) return run_ckptcheck(train_args);
  return run_ckptcheck("launch --nproc-per-node " + std::to_string(nproc) + " -- " + train_args);
}

std::map<std::string, LoadedTensor> load_latest(const std::string& root) {
  std::map<std::string, LoadedTensor> out;
  auto dir = resolve_latest_checkpoint(root);
  EXPECT_TRUE(dir.is_ok()) << root;
  if (!dir.is_ok()) return out;
  auto manifest = read_manifest_file(*dir);
  EXPECT_TRUE(manifest.is_ok());
  auto tensors = load_checkpoint_tensors(*dir, *manifest);
  EXPECT_TRUE(tensors.is_ok()) << tensors.status().to_string();
  if (!tensors.is_ok()) return out;
  for (auto& t : *tensors) out.emplace(t.name, std::move(t));
  return out;
}

// Every tensor but the per-rank RNG streams (which have no counterpart in another world size).
void expect_same_state(const std::string& original_root, const std::string& resharded_root) {
  auto a = load_latest(original_root);
  auto b = load_latest(resharded_root);
  ASSERT_FALSE(a.empty());
  size_t compared = 0;
  for (const auto& [name, t] : a) {
    if (t.component == "rng") continue;
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name << " missing after resharding";
    EXPECT_EQ(it->second.shape, t.shape) << name;
    EXPECT_TRUE(it->second.bytes == t.bytes) << name << " differs after resharding";
    ++compared;
  }
  EXPECT_GT(compared, 40u);
}

Manifest latest_manifest(const std::string& root) {
  auto dir = resolve_latest_checkpoint(root);
  EXPECT_TRUE(dir.is_ok());
  auto m = read_manifest_file(dir.is_ok() ? *dir : root);
  EXPECT_TRUE(m.is_ok());
  return m.is_ok() ? *m : Manifest{};
}

TEST(DistributedTraining, TwoRankDdpWritesOneShardPerRankAndVerifies) {
  TempDir tmp;
  auto r =
      train(2, "ddp", "--steps 2 --save-final --ckpt-dir " + tmp / "ckpt" + " --summary " + tmp / "s.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Manifest m = latest_manifest(tmp / "ckpt");
  EXPECT_EQ(m.world_size, 2);
  EXPECT_EQ(m.strategy, "ddp");
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[0].rank, 0);
  EXPECT_EQ(m.shards[1].rank, 1);
  // Model state once, each rank's RNG stream in its own shard.
  ASSERT_NE(m.find_tensor("rng.cpu_state.rank1"), nullptr);
  EXPECT_EQ(m.find_tensor("rng.cpu_state.rank1")->chunks[0].shard, 1u);
  ASSERT_NE(m.find_tensor("model.tok_emb"), nullptr);
  EXPECT_EQ(m.find_tensor("model.tok_emb")->chunks.size(), 2u);  // split by rows over both ranks
  auto v = run_ckptcheck("verify " + tmp / "ckpt");
  EXPECT_EQ(v.exit_code, 0) << v.output;
  const auto bytes = testing::read_file_bytes(tmp / "s.json");
  const std::string summary(bytes.begin(), bytes.end());
  EXPECT_NE(summary.find("communication_seconds_mean"), std::string::npos) << summary;
}

TEST(DistributedTraining, ThreeRankFsdpWritesRowBoxesOfTheGlobalTensors) {
  TempDir tmp;
  auto r = train(3, "fsdp", "--steps 2 --save-final --ckpt-dir " + tmp / "ckpt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Manifest m = latest_manifest(tmp / "ckpt");
  EXPECT_EQ(m.world_size, 3);
  ASSERT_EQ(m.shards.size(), 3u);
  const ManifestTensor* w = m.find_tensor("optimizer.model.blocks.0.attn.w_qkv.exp_avg");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->chunks.size(), 3u);  // one row range per rank, each in its own rank's shard
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(w->chunks[r].shard, r);
  EXPECT_EQ(w->chunks[1].offsets[0], w->chunks[0].shape[0]);  // in the global tensor's coordinates
  auto v = run_ckptcheck("verify " + tmp / "ckpt");
  EXPECT_EQ(v.exit_code, 0) << v.output;
}

TEST(DistributedTraining, FsdpTwoRanksMatchesDdpTwoRanks) {
  TempDir tmp;
  ASSERT_EQ(train(2, "ddp", "--steps 2 --save-final --ckpt-dir " + tmp / "ddp").exit_code, 0);
  ASSERT_EQ(train(2, "fsdp", "--steps 2 --save-final --ckpt-dir " + tmp / "fsdp").exit_code, 0);
  // The same averaged gradients, the same element-wise AdamW: slicing does not change a bit.
  auto a = load_latest(tmp / "ddp");
  auto b = load_latest(tmp / "fsdp");
  for (const char* name :
       {"model.tok_emb", "model.blocks.1.mlp.w_in", "optimizer.model.lm_head.exp_avg_sq"}) {
    ASSERT_TRUE(a.count(name) && b.count(name)) << name;
    EXPECT_TRUE(a.at(name).bytes == b.at(name).bytes) << name;
  }
}

struct ReshardCase {
  const char* label;
  int from_nproc;
  const char* from_strategy;
  int to_nproc;
  const char* to_strategy;
};

class Reshard : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(Reshard, RestoredStateEqualsTheOriginalExactly) {
  const ReshardCase c = GetParam();
  TempDir tmp;
  auto first = train(c.from_nproc, c.from_strategy, "--steps 2 --save-final --ckpt-dir " + tmp / "a");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string drift =
      std::string(c.from_strategy) != c.to_strategy ? " --allow-drift config_sha256" : "";
  auto second = train(c.to_nproc, c.to_strategy,
                      "--steps 2 --save-final --resume " + tmp / "a" + " --ckpt-dir " + tmp / "b" + drift +
                          " --summary " + tmp / "s.json");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  expect_same_state(tmp / "a", tmp / "b");
  EXPECT_EQ(latest_manifest(tmp / "b").world_size, std::max(c.to_nproc, 1));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Reshard,
                         ::testing::Values(ReshardCase{"fsdp2_to_1", 2, "fsdp", 1, "fsdp"},
                                           ReshardCase{"fsdp1_to_2", 0, "fsdp", 2, "fsdp"},
                                           ReshardCase{"fsdp2_to_3", 2, "fsdp", 3, "fsdp"},
                                           ReshardCase{"ddp2_to_fsdp2", 2, "ddp", 2, "fsdp"}),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(DistributedTraining, SingleStrategyRefusesAWorldOfTwo) {
  TempDir tmp;
  auto r = run_ckptcheck("launch --nproc-per-node 2 --grace 1 -- train --config " +
                         std::string(CKPTCHECK_SOURCE_DIR) +
                         "/fixtures/configs/pilot.yaml --steps 1 --ckpt-dir " + tmp / "c");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("strategy 'single' cannot run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: exit 2"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
