// `inspect` read at 3 a.m., through the real binary on a checkpoint ckptcheck wrote and then
// damaged: the errors come first (and are counted at the end), the damaged tensor's row is marked,
// `--errors` shows nothing else, the pins fit on one readable line, and a damaged chunk is worded
// and coded exactly as `verify` words and codes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

constexpr const char* kDamagedTensor = "optimizer.model.blocks.0.w.exp_avg";

class InspectErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
    dir_ = save_training_state(root_.path(), full_training_state());
    chunk_ = fixture_chunk(dir_, kDamagedTensor, 0);
    shard_ = read_fixture_manifest(dir_).shards[chunk_.shard].path;
    auto bytes = read_file_bytes(dir_ + "/" + shard_);
    bytes[chunk_.data_offset] ^= 1;
    write_file_bytes(dir_ + "/" + shard_, bytes);
    got_ = sha256_hex(bytes.data() + chunk_.data_offset, chunk_.data_bytes);
  }
  // What `command --json` prints about the damaged checkpoint, having exited 1 (a check failed).
  nlohmann::json failed_json(const std::string& command) const {
    const CommandResult r = run_ckptcheck(command + " --json '" + dir_ + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    return nlohmann::json::parse(r.output);
  }
  // The one line naming the damaged chunk, without the "[code] shard tensor: " before it.
  std::string expected_message() const {
    return "@" + std::to_string(chunk_.data_offset) + ": sha256 mismatch for " + kDamagedTensor + "[";
  }
  TempDir root_;
  std::string dir_, shard_, got_;
  ManifestChunk chunk_;
};

TEST_F(InspectErrorsTest, ErrorsComeFirstAndTheDamagedRowIsMarked) {
  const CommandResult r = run_ckptcheck("inspect '" + dir_ + "'");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const std::string line =
      "[chunk_sha256_mismatch] " + shard_ + " " + kDamagedTensor + ": " + expected_message();
  const size_t error = r.output.find(line);
  ASSERT_NE(error, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("expected " + digest_hex(chunk_.sha256) + " got " + got_), std::string::npos)
      << r.output;
  // Right under the verdict: before the metadata and the first tensor row.
  EXPECT_EQ(r.output.rfind("FAIL ", 0), 0u) << r.output;
  EXPECT_LT(error, r.output.find("\nstep ")) << r.output;
  EXPECT_LT(error, r.output.find("\nmodel.")) << r.output;
  // The row of the damaged tensor carries a mark; no other row does.
  const size_t row = r.output.find("\n" + std::string(kDamagedTensor) + " ");
  ASSERT_NE(row, std::string::npos) << r.output;
  const std::string row_text = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  EXPECT_NE(row_text.find("<-- FAIL chunk_sha256_mismatch"), std::string::npos) << row_text;
  size_t marks = 0;
  for (size_t at = r.output.find("<-- FAIL"); at != std::string::npos; at = r.output.find("<-- FAIL", at + 1))
    ++marks;
  EXPECT_EQ(marks, 1u) << r.output;
  // And the last line counts them.
  EXPECT_NE(r.output.find("FAIL: 1 error, listed at the top"), std::string::npos) << r.output;
}

TEST_F(InspectErrorsTest, VerifyAndInspectWordAndCodeTheDamageAlike) {
  const auto i = failed_json("inspect");
  const auto v = failed_json("verify");
  ASSERT_EQ(i["issues"].size(), 1u) << i.dump();
  ASSERT_EQ(v["errors"].size(), 1u) << v.dump();
  EXPECT_EQ(i["issues"][0]["code"], v["errors"][0]["code"]);
  EXPECT_EQ(i["issues"][0]["code"], "chunk_sha256_mismatch");
  EXPECT_EQ(i["issues"][0]["file"], v["errors"][0]["shard"]);
  EXPECT_EQ(i["issues"][0]["tensor"], v["errors"][0]["tensor"]);
  EXPECT_EQ(i["issues"][0]["message"], v["errors"][0]["message"]);
  EXPECT_EQ(i["errors"].size(), 1u) << i.dump();  // the strings stay, one per issue
}

// Without --stats, inspect hashes whole shard files with verify's scan; with it, each tensor's
// chunks are read one by one. Both must report every chunk alike, the damaged one included.
TEST_F(InspectErrorsTest, ScannedFilesAndChunkByChunkReadsReportTheSameChunks) {
  const auto a = failed_json("inspect");
  const auto b = failed_json("inspect --stats");
  ASSERT_EQ(a["tensors"].size(), b["tensors"].size());
  size_t chunks = 0, damaged = 0;
  for (size_t t = 0; t < a["tensors"].size(); ++t) {
    EXPECT_EQ(a["tensors"][t]["chunks"], b["tensors"][t]["chunks"]) << a["tensors"][t]["name"];
    for (const auto& c : a["tensors"][t]["chunks"]) {
      ++chunks;
      damaged += c["ok"] == false;
    }
  }
  EXPECT_GT(chunks, a["tensors"].size()) << "the fixture should split some tensors into chunks";
  EXPECT_EQ(damaged, 1u);
  EXPECT_EQ(a["issues"], b["issues"]);
}

TEST_F(InspectErrorsTest, ErrorsFlagShowsOnlyTheVerdictAndTheErrors) {
  const CommandResult r = run_ckptcheck("inspect --errors '" + dir_ + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("FAIL ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("[chunk_sha256_mismatch] " + shard_ + " " + kDamagedTensor), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("\nmodel."), std::string::npos) << r.output;  // no tensor rows
  EXPECT_EQ(r.output.find("pins:"), std::string::npos) << r.output;
  size_t lines = 0;
  for (char c : r.output) lines += c == '\n';
  EXPECT_EQ(lines, 3u) << r.output;  // verdict, "errors (1):", the error
  const CommandResult j = run_ckptcheck("inspect --errors --json '" + dir_ + "'");
  EXPECT_EQ(j.exit_code, 1) << j.output;
  const auto report = nlohmann::json::parse(j.output);
  EXPECT_FALSE(report.contains("tensors")) << j.output;
  EXPECT_EQ(report["issues"].size(), 1u) << j.output;
}

TEST_F(InspectErrorsTest, PinsLineIsASummaryAndJsonHasThemWhole) {
  TempDir root;
  const std::string ckpt = root / "ckpt";
  const CommandResult train = run_ckptcheck("train --config '" + kPilotConfig +
                                            "' --steps 1 --save-every 1 --ckpt-dir '" + ckpt + "'");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const CommandResult r = run_ckptcheck("inspect '" + ckpt + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("\npins: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
  EXPECT_LT(line.size(), 400u) << line;
  EXPECT_EQ(line.find('{'), std::string::npos) << line;
  EXPECT_NE(line.find("config_sha256 "), std::string::npos) << line;
  EXPECT_NE(line.find("(whole: --json)"), std::string::npos) << line;
  const CommandResult j = run_ckptcheck("inspect --json '" + ckpt + "'");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const auto pins = nlohmann::json::parse(j.output)["metadata"]["pins"];
  EXPECT_EQ(pins["config_sha256"].get<std::string>().size(), 64u) << j.output;
}

// A torch.save file with a flipped payload byte: its zip member's CRC-32 is what catches it, and the
// finding names the tensor stored there, marks its row, and its JSON chunk reads "ok": false (issue 65).
TEST(InspectTorchSaveDamage, TheCrcFindingNamesTheTensorItDamages) {
  TempDir dir;
  const std::string file = dir / "model_state.pt";
  std::filesystem::copy_file(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/model_state.pt", file);
  const auto clean = nlohmann::json::parse(run_ckptcheck("inspect --json '" + file + "'").output);
  // The largest tensor: flip the first byte of its payload, found by its sha256 in the file.
  std::string name;
  uint64_t largest = 0;
  for (const auto& t : clean["tensors"]) {
    if (t["bytes"].get<uint64_t>() > largest) {
      largest = t["bytes"].get<uint64_t>();
      name = t["name"].get<std::string>();
    }
  }
  ASSERT_FALSE(name.empty());
  auto bytes = read_file_bytes(file);
  const auto plain =
      nlohmann::json::parse(run_ckptcheck("inspect --json '" + file + "' --tensor '" + name + "'").output);
  size_t at = std::string::npos;
  for (size_t i = 0; i + largest <= bytes.size() && at == std::string::npos; ++i) {
    if (sha256_hex(bytes.data() + i, largest) == plain["tensors"][0]["sha256"].get<std::string>()) at = i;
  }
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 1;
  write_file_bytes(file, bytes);
  const CommandResult text = run_ckptcheck("inspect '" + file + "'");
  EXPECT_EQ(text.exit_code, 1) << text.output;
  EXPECT_NE(text.output.find("<-- FAIL zip_crc_mismatch"), std::string::npos) << text.output;
  const auto j = nlohmann::json::parse(run_ckptcheck("inspect --json '" + file + "'").output);
  bool named = false, marked = false;
  for (const auto& i : j["issues"]) named = named || (i["code"] == "zip_crc_mismatch" && i["tensor"] == name);
  for (const auto& t : j["tensors"]) {
    if (t["name"] == name) marked = !t["chunks"][0]["ok"].get<bool>();
  }
  EXPECT_TRUE(named) << j["issues"].dump();
  EXPECT_TRUE(marked) << "the damaged tensor's chunk reads ok: " << j.dump();
  const auto v = nlohmann::json::parse(run_ckptcheck("verify --json --weights-only '" + file + "'").output);
  bool verify_named = false;
  for (const auto& e : v["errors"])
    verify_named = verify_named || (e["code"] == "zip_crc_mismatch" && e["tensor"] == name);
  EXPECT_TRUE(verify_named) << v.dump();
}

}  // namespace
}  // namespace ckpt
