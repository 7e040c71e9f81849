// The foundation's promise, end to end through real processes: an uninterrupted run to 2N equals
// a run SIGKILLed right after committing step N and resumed by a fresh process, bit for bit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>

#include "base/file_io.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/process/child_process.h"

namespace ckpt {
namespace {

using testing::run_ckptcheck;
using testing::TempDir;

using testing::kPilotConfig;
constexpr int kHalf = 4;

// The step lines of a metrics file (checkpoint events, the drill contract's other lines, skipped).
std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("event")) lines.push_back(std::move(j));
  }
  return lines;
}

std::vector<LoadedTensor> final_state(const std::string& root) {
  auto dir = resolve_latest_checkpoint(root);
  EXPECT_TRUE(dir.is_ok()) << dir.status().to_string();
  auto manifest = read_manifest_file(*dir);
  EXPECT_TRUE(manifest.is_ok()) << manifest.status().to_string();
  auto tensors = load_checkpoint_tensors(*dir, *manifest);
  EXPECT_TRUE(tensors.is_ok()) << tensors.status().to_string();
  return tensors.is_ok() ? *tensors : std::vector<LoadedTensor>{};
}

TEST(ResumeRoundTrip, KilledAndResumedRunIsBitIdenticalToUninterrupted) {
  TempDir dir;
  const std::string steps = std::to_string(2 * kHalf);
  auto reference =
      run_ckptcheck("train --config " + kPilotConfig + " --steps " + steps + " --save-final --ckpt-dir " +
                    (dir / "ref") + " --metrics " + (dir / "ref.jsonl"));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;

  auto subject =
      ChildProcess::spawn({CKPTCHECK_BIN, "train", "--config", kPilotConfig, "--steps", steps, "--save-every",
                           std::to_string(kHalf), "--ckpt-dir", dir / "run", "--metrics", dir / "run.jsonl",
                           "--shards", "3", "--drill-hold", "after-save"},
                          dir / "subject.out", dir / "subject.err", /*pipe_stdout=*/true);
  ASSERT_TRUE(subject.is_ok()) << subject.status().to_string();
  auto event = subject->wait_for_event("committed", 120);
  ASSERT_TRUE(event.is_ok()) << "subject never committed a checkpoint: " << event.status().to_string();
  ASSERT_TRUE(subject->kill_and_reap().killed_by(SIGKILL));
  EXPECT_EQ(*resolve_latest_checkpoint(dir / "run"), dir / "run/step_00000004");

  auto resumed =
      run_ckptcheck("train --config " + kPilotConfig + " --steps " + steps + " --save-final --ckpt-dir " +
                    (dir / "run") + " --resume latest --metrics " + (dir / "run.jsonl"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;

  const auto ref_metrics = read_metrics(dir / "ref.jsonl");
  const auto run_metrics = read_metrics(dir / "run.jsonl");
  ASSERT_EQ(ref_metrics.size(), static_cast<size_t>(2 * kHalf));
  ASSERT_EQ(run_metrics.size(), static_cast<size_t>(2 * kHalf));  // 4 before the kill, 4 after
  for (size_t i = 0; i < ref_metrics.size(); ++i) {
    EXPECT_EQ(run_metrics[i]["step"], ref_metrics[i]["step"]);
    // Exact double equality: the JSON holds the shortest round-tripping representation.
    EXPECT_EQ(run_metrics[i]["loss"].get<double>(), ref_metrics[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(run_metrics[i]["grad_norm"].get<double>(), ref_metrics[i]["grad_norm"].get<double>());
  }
  const auto ref_state = final_state(dir / "ref");
  const auto run_state = final_state(dir / "run");
  ASSERT_EQ(ref_state.size(), run_state.size());
  ASSERT_FALSE(ref_state.empty());
  for (size_t i = 0; i < ref_state.size(); ++i) {
    EXPECT_EQ(ref_state[i].name, run_state[i].name);
    EXPECT_TRUE(ref_state[i].bytes == run_state[i].bytes) << ref_state[i].name << " differs after resume";
  }
}

TEST(ResumeRoundTrip, KillDuringSaveLeavesLatestOnThePreviousCheckpoint) {
  TempDir dir;
  auto subject =
      ChildProcess::spawn({CKPTCHECK_BIN, "train", "--config", kPilotConfig, "--steps", "8", "--save-every",
                           "2", "--ckpt-dir", dir / "run", "--metrics", dir / "run.jsonl", "--shards", "3",
                           "--drill-hold", "during-save", "--drill-hold-step", "4"},
                          dir / "subject.out", dir / "subject.err", /*pipe_stdout=*/true);
  ASSERT_TRUE(subject.is_ok()) << subject.status().to_string();
  ASSERT_TRUE(subject->wait_for_event("shard-written", 120).is_ok());
  ASSERT_TRUE(subject->kill_and_reap().killed_by(SIGKILL));
  const auto listing = list_checkpoints(dir / "run");
  ASSERT_EQ(listing.committed.size(), 1u);
  EXPECT_EQ(listing.committed[0], dir / "run/step_00000002");
  ASSERT_EQ(listing.uncommitted.size(), 1u);
  EXPECT_EQ(*resolve_latest_checkpoint(dir / "run"), dir / "run/step_00000002");
  auto resumed = run_ckptcheck("train --config " + kPilotConfig + " --steps 6 --ckpt-dir " + (dir / "run") +
                               " --resume latest --metrics " + (dir / "resumed.jsonl"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto metrics = read_metrics(dir / "resumed.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.front()["step"], 3);  // resumed from step 2, not from the torn step 4
}

TEST(TrainCommand, ConfigErrorsExitTwoNamingTheKey) {
  TempDir dir;
  std::ifstream in(kPilotConfig);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto pos = text.find("lr:");
  ASSERT_NE(pos, std::string::npos);
  const auto eol = text.find('\n', pos);
  text.replace(pos, eol - pos, "lr: fast");
  // The data path is relative to the config: mirror the fixtures layout so only `lr` is wrong.
  ASSERT_TRUE(make_directory(dir / "configs").is_ok());
  ASSERT_TRUE(make_directory(dir / "data").is_ok());
  testing::write_file_bytes(
      dir / "data/corpus.txt",
      testing::read_file_bytes(std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/data/corpus.txt"));
  ASSERT_TRUE(write_file_atomically(dir / "configs/bad.yaml", text).is_ok());
  auto bad =
      run_ckptcheck("train --config " + (dir / "configs/bad.yaml") + " --steps 1 --ckpt-dir " + (dir / "c"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("optimizer.lr"), std::string::npos) << bad.output;

  auto missing = run_ckptcheck("train --config " + (dir / "nope.yaml"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("nope.yaml"), std::string::npos) << missing.output;

  auto flag = run_ckptcheck("train --config " + kPilotConfig + " --shards zero");
  EXPECT_EQ(flag.exit_code, 2);
}

TEST(TrainCommand, ResumeFromACorruptShardFailsNamingTheTensor) {
  TempDir dir;
  auto run =
      run_ckptcheck("train --config " + kPilotConfig + " --steps 2 --save-final --ckpt-dir " + (dir / "c"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto manifest = read_manifest_file(dir / "c/step_00000002");
  ASSERT_TRUE(manifest.is_ok());
  const auto& chunk = manifest->tensors[0].chunks[0];
  const std::string shard = dir / ("c/step_00000002/" + manifest->shards[chunk.shard].path);
  auto bytes = testing::read_file_bytes(shard);
  bytes[chunk.data_offset] ^= 0x40;
  testing::write_file_bytes(shard, bytes);
  auto resumed = run_ckptcheck("train --config " + kPilotConfig + " --steps 3 --ckpt-dir " + (dir / "c") +
                               " --resume latest");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.output;
  EXPECT_NE(resumed.output.find(manifest->tensors[0].name), std::string::npos) << resumed.output;
}

}  // namespace
}  // namespace ckpt

namespace ckpt {
namespace {

// A copy of the pilot with one value changed, in a tree where its data path still resolves.
std::string drifted_config(const testing::TempDir& dir, const std::string& key, const std::string& value) {
  std::ifstream in(kPilotConfig);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto pos = text.find(key + ":");
  const auto eol = text.find('\n', pos);
  text.replace(pos, eol - pos, key + ": " + value);
  EXPECT_TRUE(make_directory(dir / "configs").is_ok());
  EXPECT_TRUE(make_directory(dir / "data").is_ok());
  testing::write_file_bytes(
      dir / "data/corpus.txt",
      testing::read_file_bytes(std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/data/corpus.txt"));
  EXPECT_TRUE(write_file_atomically(dir / "configs/drifted.yaml", text).is_ok());
  return dir / "configs/drifted.yaml";
}

TEST(Drift, ResumeWithAnotherConfigIsRefusedUnlessAllowedAndRecorded) {
  TempDir dir;
  ASSERT_EQ(
      run_ckptcheck("train --config " + kPilotConfig + " --steps 2 --save-final --ckpt-dir " + (dir / "c"))
          .exit_code,
      0);
  const std::string drifted = drifted_config(dir, "  weight_decay", "0.05");
  auto refused = run_ckptcheck("train --config " + drifted + " --steps 3 --ckpt-dir " + (dir / "c") +
                               " --resume latest");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("config_sha256"), std::string::npos) << refused.output;
  EXPECT_EQ(list_checkpoints(dir / "c").committed.size(), 1u);

  auto verify = run_ckptcheck("verify " + (dir / "c") + " --against-env --config " + drifted + " --json");
  EXPECT_EQ(verify.exit_code, 2) << verify.output;
  EXPECT_NE(verify.output.find("pins_drift"), std::string::npos) << verify.output;
  EXPECT_EQ(run_ckptcheck("verify " + (dir / "c") + " --against-env --config " + kPilotConfig).exit_code, 0);

  auto allowed = run_ckptcheck("train --config " + drifted + " --steps 3 --save-final --ckpt-dir " +
                               (dir / "c") + " --resume latest --allow-drift config_sha256");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  auto manifest = read_manifest_file(dir / "c/step_00000003");
  ASSERT_TRUE(manifest.is_ok());
  ASSERT_TRUE(manifest->extra.contains("allowed_drift")) << manifest->extra.dump();
  EXPECT_NE(manifest->extra["allowed_drift"].dump().find("config_sha256"), std::string::npos);
}

}  // namespace
}  // namespace ckpt
