// `ckptcheck convert` through the real binary, plus `verify` on checkpoints of every format: round
// trips native -> safetensors -> hdf5 -> native over 1, 2 and 3 shards stay bit-identical, a
// committed step is never rewritten, flipped payload bytes in safetensors and HDF5 shards are
// caught, and `train --format` writes checkpoints that verify. Skipped when not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

class ConvertCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
  // Converts `src` into a fresh root and returns the committed checkpoint dir.
  std::string convert(const std::string& src, const std::string& root, const std::string& format,
                      size_t shards) {
    const CommandResult r = run_ckptcheck("convert '" + src + "' '" + root + "' --format " + format +
                                          " --shards " + std::to_string(shards));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    auto dir = resolve_latest_checkpoint(root);
    EXPECT_TRUE(dir.is_ok()) << dir.status().to_string();
    return dir.is_ok() ? *dir : "";
  }
  TempDir work_;
};

void expect_bytes_identical(const std::string& dir, const std::vector<LoadedTensor>& state) {
  const Manifest m = read_fixture_manifest(dir);
  auto loaded = load_checkpoint_tensors(dir, m);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  ASSERT_EQ(loaded->size(), state.size());
  for (const auto& want : state) {
    bool found = false;
    for (const auto& got : *loaded) {
      if (got.name != want.name) continue;
      found = true;
      EXPECT_EQ(got.bytes, want.bytes) << want.name;
      EXPECT_EQ(got.component, want.component) << want.name;
    }
    EXPECT_TRUE(found) << want.name;
  }
}

TEST_F(ConvertCommandTest, RoundTripThroughEveryFormatAndShardCount) {
  const auto state = full_training_state();
  for (size_t shards : {1, 2, 3}) {
    SCOPED_TRACE("shards " + std::to_string(shards));
    const std::string base = work_ / ("s" + std::to_string(shards));
    std::string previous = save_training_state(base + "-native0", state, kFixtureStep, shards);
    const std::string original = previous;
    for (const char* format : {"safetensors", "hdf5", "native"}) {
      SCOPED_TRACE(format);
      const std::string next = convert(previous, base + "-" + format, format, shards);
      ASSERT_FALSE(next.empty());
      const Manifest m = read_fixture_manifest(next);
      EXPECT_EQ(m.shards.size(), shards);
      EXPECT_EQ(m.shards[0].format, format);
      EXPECT_EQ(m.step, kFixtureStep);
      const CommandResult d = run_ckptcheck("diff '" + original + "' '" + next + "'");
      EXPECT_EQ(d.exit_code, 0) << d.output;
      const CommandResult v = run_ckptcheck("verify '" + next + "'");
      EXPECT_EQ(v.exit_code, 0) << v.output;
      expect_bytes_identical(next, state);
      previous = next;
    }
  }
}

TEST_F(ConvertCommandTest, ManifestFactsAreCarriedOver) {
  const std::string src = save_training_state(work_ / "src", full_training_state());
  edit_manifest(src, [](Manifest& m) {
    m.config = {{"model", {{"layers", 2}}}};
    m.pins = {{"torch", "1.13.1"}};
    m.extra = {{"allow_drift", {"dataset_revision"}}};
    m.world_size = 2;
    m.strategy = "ddp";
  });
  const Manifest want = read_fixture_manifest(src);
  const Manifest got = read_fixture_manifest(convert(src, work_ / "dst", "safetensors", 2));
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.config, want.config);
  EXPECT_EQ(got.pins, want.pins);
  EXPECT_EQ(got.extra, want.extra);
  EXPECT_EQ(got.world_size, 2);
  EXPECT_EQ(got.strategy, "ddp");
}

TEST_F(ConvertCommandTest, RefusesAnExistingCommittedStep) {
  const std::string src = save_training_state(work_ / "src", full_training_state());
  const std::string dst = convert(src, work_ / "dst", "hdf5", 1);
  const auto before = read_file_bytes(dst + "/" + kManifestFileName);
  const CommandResult again =
      run_ckptcheck("convert '" + src + "' '" + (work_ / "dst") + "' --format native");
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  EXPECT_EQ(read_file_bytes(dst + "/" + kManifestFileName), before);
}

TEST_F(ConvertCommandTest, BadFormatOrSourceExitsTwo) {
  const std::string src = save_training_state(work_ / "src", full_training_state());
  const CommandResult r = run_ckptcheck("convert '" + src + "' '" + (work_ / "dst") + "' --format gguf");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("safetensors"), std::string::npos) << r.output;
  EXPECT_EQ(
      run_ckptcheck("convert '" + (work_ / "none") + "' '" + (work_ / "dst") + "' --format native").exit_code,
      2);
  EXPECT_EQ(run_ckptcheck("convert '" + src + "' '" + (work_ / "dst") + "'").exit_code,
            2);  // --format required
}

// The errors `verify --json` reported, by code.
std::vector<std::string> error_codes(const CommandResult& r) {
  std::vector<std::string> codes;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.output;
  if (!j.is_object()) return codes;
  for (const auto& e : j["errors"]) codes.push_back(e["code"]);
  return codes;
}

// `--manifest-version 2` leaves the chunk records in the native shard headers: the manifest lists
// none, every command reads the checkpoint as it reads version 1, and a header that is not the one
// committed is caught by name, --quick included (it must read the headers to know the chunks).
TEST_F(ConvertCommandTest, ManifestVersionTwoKeepsTheChunksInTheHeadersAndChecksThem) {
  auto state = full_training_state();
  const std::string src = save_training_state(work_ / "src", state);
  auto convert_v2 = [&](const std::string& from, const std::string& root) {
    const CommandResult r = run_ckptcheck("convert '" + from + "' '" + root +
                                          "' --format native --shards 3 --manifest-version 2");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    auto dir = resolve_latest_checkpoint(root);
    return dir.is_ok() ? *dir : "";
  };
  const std::string v2 = convert_v2(src, work_ / "v2");
  ASSERT_FALSE(v2.empty());
  const auto text = read_file_bytes(v2 + "/" + kManifestFileName);
  const std::string manifest(text.begin(), text.end());
  EXPECT_EQ(manifest.find("\"chunks\""), std::string::npos);
  EXPECT_NE(manifest.find("\"version\": 2"), std::string::npos);
  EXPECT_LT(text.size(), read_file_bytes(src + "/" + kManifestFileName).size());
  for (const std::string& command : {"verify '" + v2 + "'", "verify --quick '" + v2 + "'",
                                     "diff '" + src + "' '" + v2 + "'", "inspect '" + v2 + "'"}) {
    const CommandResult r = run_ckptcheck(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
  }
  expect_bytes_identical(v2, state);

  // A shard of another save in place of one of these: well formed, but not the committed header.
  state[0].bytes[0] ^= 0x01;
  const std::string other = convert_v2(save_training_state(work_ / "other-src", state), work_ / "other");
  size_t differing = 0;  // the shard that holds the changed tensor
  while (differing < 3 && read_file_bytes(fixture_shard_path(v2, differing)) ==
                              read_file_bytes(fixture_shard_path(other, differing)))
    ++differing;
  ASSERT_LT(differing, 3u);
  const std::string shard0 = fixture_shard_path(v2, differing);
  const auto committed_shard = read_file_bytes(shard0);
  write_file_bytes(shard0, read_file_bytes(fixture_shard_path(other, differing)));
  for (const char* quick : {"", "--quick "}) {
    const CommandResult r = run_ckptcheck(std::string("verify --json ") + quick + "'" + v2 + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(error_codes(r), std::vector<std::string>{"shard_sha256_mismatch"}) << r.output;
    EXPECT_NE(r.output.find("header sha256 mismatch: the manifest records"), std::string::npos) << r.output;
  }
  // A missing shard: named once; its tensors are not also reported uncovered.
  write_file_bytes(shard0, committed_shard);
  ASSERT_EQ(run_ckptcheck("verify '" + v2 + "'").exit_code, 0);
  std::filesystem::remove(fixture_shard_path(v2, 1));
  const CommandResult missing = run_ckptcheck("verify --json '" + v2 + "'");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_EQ(error_codes(missing), std::vector<std::string>{"shard_missing"}) << missing.output;
  // --against-env reads only the manifest's config for the environment: the damage is the report's.
  const CommandResult against_env = run_ckptcheck("verify --json --against-env '" + v2 + "'");
  EXPECT_EQ(against_env.exit_code, 1) << against_env.output;
  EXPECT_NE(against_env.output.find("shard_missing"), std::string::npos) << against_env.output;
  // Another reader names the shard too (inspect reads through read_manifest_file).
  const CommandResult inspect = run_ckptcheck("inspect '" + v2 + "'");
  EXPECT_NE(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("shard-00001-of-00003.cks"), std::string::npos) << inspect.output;

  // Native shards get version 2 unless version 1 is asked for; other formats always get version 1.
  const Manifest by_default = read_fixture_manifest(convert(src, work_ / "default", "native", 2));
  EXPECT_EQ(by_default.chunk_records, ChunkRecords::kInShardHeaders);
  EXPECT_EQ(read_fixture_manifest(convert(src, work_ / "st", "safetensors", 2)).chunk_records,
            ChunkRecords::kInManifest);
  ASSERT_EQ(
      run_ckptcheck("convert '" + src + "' '" + (work_ / "v1") + "' --format native --manifest-version 1")
          .exit_code,
      0);
  const auto v1_text = read_file_bytes(*resolve_latest_checkpoint(work_ / "v1") + "/" + kManifestFileName);
  EXPECT_NE(std::string(v1_text.begin(), v1_text.end()).find("\"chunks\""), std::string::npos);

  // Only native headers hold a chunk's whole record.
  const CommandResult hdf5 =
      run_ckptcheck("convert '" + src + "' '" + (work_ / "h") + "' --format hdf5 --manifest-version 2");
  EXPECT_EQ(hdf5.exit_code, 2) << hdf5.output;
  EXPECT_NE(hdf5.output.find("--manifest-version 2 keeps the chunk records in native shard headers; "
                             "--format hdf5 has none"),
            std::string::npos)
      << hdf5.output;
}

// SRC is checked whole before its chunks are copied: damage exits 1 naming the chunk, and DST is
// never begun.
TEST_F(ConvertCommandTest, ADamagedSourceExitsOneAndBeginsNothing) {
  const std::string src = save_training_state(work_ / "src", full_training_state());
  ASSERT_FALSE(flip_chunk_payload_byte(src, "model.blocks.0.w", 1, 2, 0x20).empty());
  const CommandResult r = run_ckptcheck("convert '" + src + "' '" + (work_ / "dst") + "' --format native");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("sha256 mismatch for model.blocks.0.w"), std::string::npos) << r.output;
  EXPECT_NE(::access((work_ / "dst").c_str(), F_OK), 0) << "DST was created";
}

// On a terminal, convert shows its phase and the bytes it has copied, the line cleared before it
// ends; piped, it writes no progress at all.
TEST_F(ConvertCommandTest, TerminalShowsTheBytesCopiedPipedStaysQuiet) {
  const auto state = full_training_state();
  const std::string src = save_training_state(work_ / "src", state);
  size_t state_bytes = 0;
  for (const LoadedTensor& t : state) state_bytes += t.bytes.size();
  const std::string line = std::string(CKPTCHECK_BIN) + " convert '" + src + "' '";
  // script(1) gives convert a terminal on stderr; CKPTCHECK_NO_PROGRESS is left unset in both runs.
  const CommandResult tty = testing::run_command("env -u CKPTCHECK_NO_PROGRESS script -qec \"" + line +
                                                 (work_ / "tty") + "' --format native\" /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  EXPECT_NE(tty.output.find("[convert: checking every chunk of SRC]"), std::string::npos) << tty.output;
  // Every byte of the state, copied from SRC (none held), then the line cleared before the result.
  const std::string all = std::to_string(state_bytes) + "/" + std::to_string(state_bytes);
  const size_t done = tty.output.find("[convert: bytes copied] " + all);
  ASSERT_NE(done, std::string::npos) << tty.output;
  EXPECT_LT(tty.output.find("\r\033[K", done), tty.output.find("committed ")) << tty.output;
  const CommandResult piped = testing::run_command("env -u CKPTCHECK_NO_PROGRESS " + line +
                                                   (work_ / "piped") + "' --format native 2>&1 | cat");
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find("\r\033[K"), std::string::npos) << piped.output;
  EXPECT_EQ(piped.output.find("[convert: "), std::string::npos) << piped.output;
}

TEST_F(ConvertCommandTest, PytorchFileBecomesACheckpoint) {
  const std::string pt = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt";
  const std::string dir = convert(pt, work_ / "dst", "safetensors", 2);
  // Not `verify`: a bare state dict is not a resumable training state, which verify reports.
  EXPECT_EQ(run_ckptcheck("inspect '" + dir + "'").exit_code, 0);
  const CommandResult d = run_ckptcheck("diff '" + pt + "' '" + dir + "'");
  EXPECT_EQ(d.exit_code, 0) << d.output;
}

// The files real tools wrote (torch 1.13 and 2.11 DCP, Megatron's torch_dist, DCP's safetensors
// mode, FSDP2 on two ranks, a Lightning checkpoint, torch.save of every dtype), copied chunk by
// chunk from their files, are what reading them whole gives: `diff SRC DST` finds every tensor
// bit-identical.
TEST_F(ConvertCommandTest, FilesRealToolsWroteAreCopiedBitIdentical) {
  const std::string data = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/";
  for (const char* source : {"dcp/torch113", "dcp/megatron_torch_dist", "dcp/safetensors_v28",
                             "torch211/dcp_fsdp2_2rank", "torch211/lightning.ckpt", "torch211/dtypes.pt"}) {
    SCOPED_TRACE(source);
    const std::string dir = convert(
        data + source, work_ / ("out-" + std::to_string(std::hash<std::string>{}(source))), "native", 3);
    ASSERT_FALSE(dir.empty());
    const CommandResult d = run_ckptcheck("diff '" + data + source + "' '" + dir + "'");
    EXPECT_EQ(d.exit_code, 0) << d.output;
    EXPECT_NE(d.output.find("bit-identical"), std::string::npos) << d.output;
  }
}

// Flips one payload byte of a chunk, then re-seals the shard hashes so only the chunk hash can tell.
void flip_payload_byte(const std::string& dir, const std::string& tensor) {
  ASSERT_FALSE(flip_chunk_payload_byte(dir, tensor, 0, 3, 0x10).empty());
  refresh_shard_hashes(dir);
}

TEST_F(ConvertCommandTest, VerifyCatchesAFlippedPayloadByteInSafetensorsAndHdf5) {
  const std::string src = save_training_state(work_ / "src", full_training_state());
  for (const char* format : {"safetensors", "hdf5"}) {
    SCOPED_TRACE(format);
    const std::string dir = convert(src, work_ / format, format, 2);
    ASSERT_EQ(run_ckptcheck("verify '" + dir + "'").exit_code, 0);
    flip_payload_byte(dir, "model.blocks.0.w");
    const CommandResult v = run_ckptcheck("verify '" + dir + "'");
    EXPECT_EQ(v.exit_code, 1) << v.output;
    EXPECT_NE(v.output.find("model.blocks.0.w"), std::string::npos) << v.output;
    EXPECT_EQ(run_ckptcheck("inspect '" + dir + "'").exit_code, 1);
    EXPECT_EQ(run_ckptcheck("diff '" + src + "' '" + dir + "'").exit_code, 1);
  }
}

TEST_F(ConvertCommandTest, TrainWritesEveryFormatThatVerifies) {
  const std::string config = testing::kPilotConfig;
  for (const char* format : {"safetensors", "hdf5"}) {
    SCOPED_TRACE(format);
    const std::string root = work_ / (std::string("train-") + format);
    const CommandResult t =
        run_ckptcheck("train --config '" + config + "' --steps 2 --save-final --shards 2 --format " + format +
                      " --ckpt-dir '" + root + "' --metrics '" + root + ".jsonl'");
    ASSERT_EQ(t.exit_code, 0) << t.output;
    auto dir = resolve_latest_checkpoint(root);
    ASSERT_TRUE(dir.is_ok()) << dir.status().to_string();
    EXPECT_EQ(read_fixture_manifest(*dir).shards[0].format, format);
    const CommandResult v = run_ckptcheck("verify '" + root + "'");
    EXPECT_EQ(v.exit_code, 0) << v.output;
    EXPECT_EQ(run_ckptcheck("inspect '" + root + "'").exit_code, 0);
  }
}

}  // namespace
}  // namespace ckpt
