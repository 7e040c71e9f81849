// verify with the hashing shared by several tasks (verify --distributed), the tasks here threads
// joined by an in-process all-gather: every task builds the report a single process builds, byte
// for byte apart from the timing, whichever task's share a damaged byte lies in. The same over
// MPI under a real Slurm: tests/slurm/slurm_verify_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/test_paths.h"
#include "tests/support/thread_world.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/seal.h"
#include "verifier/tensors/inspect_report.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

std::string without_timing(const VerifyReport& report) {
  nlohmann::json j = report_to_json(report);
  j.erase("seconds");
  return j.dump();
}

// Each task's report (as JSON without timing), from `tasks` threads verifying `dir` together.
std::vector<std::string> verify_on_tasks(const std::string& dir, int tasks) {
  ThreadWorld world(tasks);
  std::vector<std::string> out(static_cast<size_t>(tasks));
  std::vector<std::thread> threads;
  for (int r = 0; r < tasks; ++r) {
    threads.emplace_back([&, r] {
      ThreadWorld::Rank task(world, r);
      VerifyOptions options;
      options.jobs = 1;
      options.distributed = &task;
      auto report = verify_path(dir, options);
      out[static_cast<size_t>(r)] =
          report.is_ok() ? without_timing(*report) : "error: " + report.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::string verify_alone(const std::string& dir) {
  auto report = verify_path(dir, VerifyOptions{});
  return report.is_ok() ? without_timing(*report) : "error: " + report.status().to_string();
}

// Tensors of 1-3 MiB, so the scan is cut into many units and every task gets a share.
std::vector<LoadedTensor> large_training_state() {
  std::vector<LoadedTensor> state = full_training_state();
  for (int i = 0; i < 12; ++i)
    state.push_back(finite_f32_tensor("rng.big." + std::to_string(i), {256, 1024 * (1 + i % 3)}, 0.1f));
  return state;
}

// Both manifest versions: version 2's tasks each read the shard headers for the chunks, and scan
// after them (shards/shard_header_chunks.h).
class DistributedVerifyOfEachVersion : public ::testing::TestWithParam<ChunkRecords> {
 protected:
  std::string save(const std::string& root) {
    return save_training_state(root, large_training_state(), kFixtureStep, 2, "native", GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(ManifestVersions, DistributedVerifyOfEachVersion,
                         ::testing::Values(ChunkRecords::kInManifest, ChunkRecords::kInShardHeaders));

TEST_P(DistributedVerifyOfEachVersion, EveryTaskReportsWhatOneProcessReports) {
  TempDir root;
  const std::string dir = save(root.path());
  const std::string alone = verify_alone(dir);
  ASSERT_NE(alone.find("\"ok\":true"), std::string::npos) << alone;
  for (int tasks : {2, 3, 5}) {
    for (const std::string& report : verify_on_tasks(dir, tasks))
      EXPECT_EQ(report, alone) << tasks << " tasks";
  }
}

TEST_P(DistributedVerifyOfEachVersion, AFlippedByteInAnyTasksShareIsReportedByEveryTask) {
  TempDir root;
  const std::string dir = save(root.path());
  // One byte in each big tensor in turn: across them, every task's share holds a damaged byte.
  for (int i = 0; i < 12; i += 5) {
    const std::string name = "rng.big." + std::to_string(i);
    const ManifestChunk chunk = fixture_chunk(dir, name, 0);
    const std::string shard = fixture_shard_path(dir, chunk.shard);
    std::vector<uint8_t> bytes = read_file_bytes(shard);
    bytes[chunk.data_offset + 4096] ^= 0x40;
    write_file_bytes(shard, bytes);
    const std::string alone = verify_alone(dir);
    ASSERT_NE(alone.find("chunk_sha256_mismatch"), std::string::npos) << alone;
    for (const std::string& report : verify_on_tasks(dir, 3)) EXPECT_EQ(report, alone) << name;
    bytes[chunk.data_offset + 4096] ^= 0x40;
    write_file_bytes(shard, bytes);
  }
}

TEST(DistributedVerify, ATaskThatSeesOtherFilesFailsTheVerify) {
  TempDir root_a, root_b;
  const std::string a = save_training_state(root_a.path(), large_training_state(), kFixtureStep, 2);
  const std::string b = save_training_state(root_b.path(), full_training_state(), kFixtureStep, 3);
  ThreadWorld world(2);
  std::vector<Result<VerifyReport>> reports(2, Status::ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ThreadWorld::Rank task(world, r);
      VerifyOptions options;
      options.distributed = &task;
      reports[static_cast<size_t>(r)] = verify_path(r == 0 ? a : b, options);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& report : reports) {
    ASSERT_FALSE(report.is_ok());
    EXPECT_NE(report.status().message().find("planned other scan units"), std::string::npos)
        << report.status().to_string();
  }
}

TEST(DistributedVerify, UnsealedOtherKindsAreRefusedOnManyTasks) {
  const std::string file = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt";
  for (const std::string& r : verify_on_tasks(file, 2)) {
    EXPECT_NE(r.find("--distributed"), std::string::npos) << r;
    EXPECT_NE(r.find("no seal"), std::string::npos) << r;
  }
}

TEST(DistributedVerify, ASealedFileIsVerifiedByItsPiecesOnManyTasksAsByOne) {
  // A torch.save file sealed in small pieces, so each task gets some; then one byte changed.
  TempDir dir;
  const std::string file = dir / "model_state.pt";
  write_file_bytes(file,
                   read_file_bytes(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt"));
  SealOptions seal;
  seal.piece_bytes = 64;
  ASSERT_TRUE(seal_checkpoint(file, seal).is_ok());
  const std::string alone = verify_alone(file);  // it holds no optimizer state: that error only
  ASSERT_NE(alone.find("\"sealed\":true"), std::string::npos) << alone;
  ASSERT_EQ(alone.find("seal_"), std::string::npos) << alone;
  for (const std::string& report : verify_on_tasks(file, 3)) EXPECT_EQ(report, alone);
  std::vector<uint8_t> bytes = read_file_bytes(file);
  bytes[bytes.size() / 2] ^= 0x10;
  write_file_bytes(file, bytes);
  const std::string damaged = verify_alone(file);
  ASSERT_NE(damaged.find("seal_file_sha256_mismatch"), std::string::npos) << damaged;
  for (const std::string& report : verify_on_tasks(file, 3)) EXPECT_EQ(report, damaged);
}

TEST(DistributedSeal, ManyTasksWriteTheSealOneProcessWrites) {
  // A DCP directory of several files, sealed once by one process and once by 3 tasks (rank 0 writes).
  TempDir a, b;
  const std::string src = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/torch113";
  ASSERT_EQ(
      run_command("cp -r '" + src + "' '" + a.path() + "/dcp' && cp -r '" + src + "' '" + b.path() + "/dcp'")
          .exit_code,
      0);
  ASSERT_TRUE(seal_checkpoint(a / "dcp", SealOptions{}).is_ok());
  ThreadWorld world(3);
  std::vector<std::string> outcomes(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      ThreadWorld::Rank task(world, r);
      SealOptions options;
      options.distributed = &task;
      auto summary = seal_checkpoint(b / "dcp", options);
      outcomes[static_cast<size_t>(r)] =
          summary.is_ok() ? std::to_string(summary->files) : summary.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& o : outcomes) EXPECT_EQ(o, outcomes[0]);
  const auto one = read_file_bytes(seal_path_for(a / "dcp"));
  const auto many = read_file_bytes(seal_path_for(b / "dcp"));
  EXPECT_FALSE(one.empty());
  EXPECT_EQ(std::string(one.begin(), one.end()), std::string(many.begin(), many.end()));
}

TEST(DistributedInspect, ManyTasksPrintTheStatisticsOneProcessPrints) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), large_training_state(), kFixtureStep, 2);
  InspectOptions alone_options;
  alone_options.stats = true;
  auto alone = inspect_checkpoint(dir, alone_options);
  ASSERT_TRUE(alone.is_ok()) << alone.status().to_string();
  const std::string expected = inspect_report_to_json(*alone).dump();
  ThreadWorld world(3);
  std::vector<std::string> out(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      ThreadWorld::Rank task(world, r);
      InspectOptions options;
      options.stats = true;
      options.distributed = &task;
      auto report = inspect_checkpoint(dir, options);
      out[static_cast<size_t>(r)] =
          report.is_ok() ? inspect_report_to_json(*report).dump() : report.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& o : out) EXPECT_EQ(o, expected);
}

}  // namespace
}  // namespace ckpt
