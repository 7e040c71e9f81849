// `seal PATH` asks the layouts registry what PATH is, as verify, inspect and diff do: a sharded
// index is sealed as the folder of its shards (where verify looks), a path two layouts claim is
// refused; and a .keras archive is sealed tensor by tensor where its members are stored, member by
// member where they are deflated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

const std::string kSealLayoutsData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/";

std::string seal_q(const std::string& s) {
  return "'" + s + "'";
}

nlohmann::json read_seal_json(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  return nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
}

class SealLayouts : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built"; }
  TempDir scratch_;
};

// Before, `seal model.safetensors.index.json` sealed the index file alone, beside it, where verify
// never looks: verify of the index then said "no seal".
TEST_F(SealLayouts, AnIndexIsSealedAsTheFolderOfItsShards) {
  const std::string dir = scratch_ / "m";
  fs::create_directories(dir);
  const std::string shard = "model-00001-of-00001.safetensors";
  fs::copy_file(kSealLayoutsData + "dcp/hf_sharded_safetensors/shard-00002-model-00001-of-00001.safetensors",
                dir + "/" + shard);
  const std::string text =
      nlohmann::json{
          {"weight_map",
           {{"model.layers.0.weight", shard}, {"model.embed.weight", shard}, {"model.layers.0.bias", shard}}}}
          .dump();
  const std::string index = dir + "/model.safetensors.index.json";
  write_file_bytes(index, std::vector<uint8_t>(text.begin(), text.end()));
  const CommandResult sealed = run_ckptcheck("seal " + seal_q(index));
  ASSERT_EQ(sealed.exit_code, 0) << sealed.output;
  EXPECT_TRUE(fs::exists(dir + "/ckptcheck.seal.json")) << sealed.output;
  EXPECT_FALSE(fs::exists(index + ".ckptcheck.seal.json")) << sealed.output;
  const CommandResult v = run_ckptcheck("verify --json --weights-only " + seal_q(index));
  EXPECT_EQ(v.exit_code, 0) << v.output;
  const auto j = nlohmann::json::parse(v.output, nullptr, false);
  EXPECT_EQ(j.value("sealed", false), true) << v.output;
}

// A path two layouts claim: which layout's files a seal should cover is what is unknown, so seal
// refuses it as verify, inspect and diff do, naming both, and writes nothing.
TEST_F(SealLayouts, APathTwoLayoutsClaimIsRefused) {
  const std::string dir = scratch_ / "torch113";
  fs::copy(kSealLayoutsData + "dcp/torch113", dir, fs::copy_options::recursive);
  write_file_bytes(dir + "/trainer_state.json", {'{', '}'});
  const CommandResult r = run_ckptcheck("seal " + seal_q(dir));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("claimed by two layouts, dcp (.metadata) and hf_trainer (trainer_state.json)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir + "/ckptcheck.seal.json"));
}

// A trainer's checkpoint found from the folder above it (HF's run folder, DeepSpeed's root with
// `latest`) is sealed as that checkpoint, where verify of either path looks. Before, the seal covered
// the run folder: the trainer's next save (or its rotation of old checkpoints) broke it.
TEST_F(SealLayouts, ATrainerCheckpointFoundFromAboveIsSealedAsThatCheckpoint) {
  struct Case {
    std::string fixture, checkpoint, newer;
  };
  for (const Case& c :
       {Case{"hf/run", "checkpoint-10", "checkpoint-20"}, Case{"deepspeed/zero2", "global_step10", ""}}) {
    const std::string root = scratch_ / fs::path(c.fixture).filename().string();
    fs::copy(kSealLayoutsData + "trainers/" + c.fixture, root, fs::copy_options::recursive);
    const CommandResult sealed = run_ckptcheck("seal " + seal_q(root));
    ASSERT_EQ(sealed.exit_code, 0) << sealed.output;
    EXPECT_TRUE(fs::exists(root + "/" + c.checkpoint + "/ckptcheck.seal.json")) << c.fixture << sealed.output;
    EXPECT_FALSE(fs::exists(root + "/ckptcheck.seal.json")) << c.fixture << sealed.output;
    for (const std::string& path : {root, root + "/" + c.checkpoint}) {
      const CommandResult v = run_ckptcheck("verify --json " + seal_q(path));
      EXPECT_EQ(v.exit_code, 0) << v.output;
      EXPECT_EQ(nlohmann::json::parse(v.output, nullptr, false).value("sealed", false), true)
          << path << ": " << v.output;
    }
    if (c.newer.empty()) continue;
    // The trainer saves again: the run folder now resumes from the newer checkpoint, unsealed, and
    // the sealed one still verifies as sealed.
    fs::copy(root + "/" + c.checkpoint, root + "/" + c.newer, fs::copy_options::recursive);
    fs::remove(root + "/" + c.newer + "/ckptcheck.seal.json");
    const CommandResult newer = run_ckptcheck("verify --json " + seal_q(root));
    EXPECT_EQ(nlohmann::json::parse(newer.output, nullptr, false).value("sealed", true), false)
        << newer.output;
    EXPECT_NE(newer.output.find(c.newer), std::string::npos) << newer.output;
    const CommandResult older = run_ckptcheck("verify --json " + seal_q(root + "/" + c.checkpoint));
    EXPECT_EQ(older.exit_code, 0) << older.output;
    EXPECT_EQ(nlohmann::json::parse(older.output, nullptr, false).value("sealed", false), true)
        << older.output;
  }
}

// A seal vouches for the files it lists, and only those: a seal of nothing is never written, and a
// file it does not list (added since, or a hand-made empty seal) gets the checkpoint kind's own checks
// in full, as unsealed. Before, any seal switched those checks to --quick for every file, so an empty
// seal made a DCP folder with a CRC error PASS, sealed and signed.
TEST_F(SealLayouts, FilesASealDoesNotListGetTheKindsOwnChecks) {
  const std::string empty = scratch_ / "empty";
  fs::create_directories(empty);
  EXPECT_EQ(run_ckptcheck("seal " + seal_q(empty)).exit_code, 2) << "nothing to seal";
  EXPECT_FALSE(fs::exists(empty + "/ckptcheck.seal.json"));

  const std::string dcp = scratch_ / "dcp";
  fs::copy(kSealLayoutsData + "dcp/torch113", dcp, fs::copy_options::recursive);
  const std::string nothing =
      R"({"algorithm": "sha256", "files": [], "format": "ckptcheck.seal", )"
      R"("seal_sha256": "8b048e3dcf73665c6f110e1a779e84b8a73a7c5729f73a4d0007c073f14c97d5", )"
      R"("version": 1})";
  write_file_bytes(dcp + "/ckptcheck.seal.json", std::vector<uint8_t>(nothing.begin(), nothing.end()));
  auto bytes = read_file_bytes(dcp + "/__0_0.distcp");
  bytes[323] ^= 0x40;  // a payload byte of model.weight: its zip CRC-32 says so
  write_file_bytes(dcp + "/__0_0.distcp", bytes);
  CommandResult v = run_ckptcheck("verify --json " + seal_q(dcp));
  EXPECT_EQ(v.exit_code, 1) << v.output;
  EXPECT_NE(v.output.find("zip_crc_mismatch"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("seal_unlisted_file"), std::string::npos) << v.output;

  // A sealed, signed folder with a damaged optimizer.pt added after: the CRC finds it, and under
  // --pubkey the unlisted file fails (no signature covers it).
  const std::string folder = scratch_ / "m";
  fs::create_directories(folder);
  fs::copy_file(kSealLayoutsData + "pytorch/adamw_state.pt", folder + "/pytorch_model.bin");
  ASSERT_EQ(run_ckptcheck("seal " + seal_q(folder)).exit_code, 0);
  ASSERT_TRUE(write_ed25519_key_pair(scratch_ / "k.pem", scratch_ / "k.pub").is_ok());
  ASSERT_EQ(run_ckptcheck("sign " + seal_q(folder) + " --key " + seal_q(scratch_ / "k.pem")).exit_code, 0);
  EXPECT_EQ(
      run_ckptcheck("verify --weights-only --pubkey " + seal_q(scratch_ / "k.pub") + " " + seal_q(folder))
          .exit_code,
      0);
  auto optimizer = read_file_bytes(kSealLayoutsData + "pytorch/adamw_state.pt");
  const std::string marker = "data/0";
  const auto at = std::search(optimizer.begin(), optimizer.end(), marker.begin(), marker.end());
  ASSERT_NE(at, optimizer.end());
  const size_t payload = ((static_cast<size_t>(at - optimizer.begin()) + 6 + 63) / 64) * 64 + 2;
  optimizer[payload] ^= 0x40;
  write_file_bytes(folder + "/optimizer.pt", optimizer);
  v = run_ckptcheck("verify --weights-only --json " + seal_q(folder));
  EXPECT_EQ(v.exit_code, 1) << v.output;
  EXPECT_NE(v.output.find("zip_crc_mismatch"), std::string::npos) << v.output;
  v = run_ckptcheck("verify --weights-only --json --pubkey " + seal_q(scratch_ / "k.pub") + " " +
                    seal_q(folder));
  EXPECT_EQ(v.exit_code, 1) << v.output;
  const auto j = nlohmann::json::parse(v.output, nullptr, false);
  bool unlisted_error = false;
  for (const auto& e : j["errors"]) unlisted_error = unlisted_error || e["code"] == "seal_unlisted_file";
  EXPECT_TRUE(unlisted_error) << v.output;
}

// Stored members: every tensor's payload is a range of the archive, and the range holds exactly the
// bytes inspect reads for that tensor. Deflated: the member's compressed bytes are one range, and a
// byte flipped there is named by member.
TEST_F(SealLayouts, KerasArchivesAreSealedByTensorOrByDeflatedMember) {
  for (const std::string name : {"clean.keras", "clean_npz.keras"}) {
    const std::string path = scratch_ / name;
    fs::copy_file(kSealLayoutsData + "trainers/keras/" + name, path);
    ASSERT_EQ(run_ckptcheck("seal " + seal_q(path)).exit_code, 0) << name;
    const auto seal = read_seal_json(path + ".ckptcheck.seal.json");
    const CommandResult listed = run_ckptcheck("inspect --json " + seal_q(path));
    const auto inspected = nlohmann::json::parse(listed.output, nullptr, false);
    std::map<std::string, std::string> sha;
    for (const auto& t : inspected["tensors"]) sha[t["name"]] = t["sha256"];
    ASSERT_EQ(seal["files"][0]["tensors"].size(), sha.size()) << seal.dump();
    for (const auto& t : seal["files"][0]["tensors"])
      EXPECT_EQ(t["sha256"], sha[t["name"]])
          << name << ": the sealed range is the tensor's bytes: " << t.dump();
  }
  for (const std::string name : {"clean_deflated.keras", "clean_npz_deflated.keras"}) {
    const std::string path = scratch_ / name;
    fs::copy_file(kSealLayoutsData + "trainers/keras/" + name, path);
    ASSERT_EQ(run_ckptcheck("seal " + seal_q(path)).exit_code, 0) << name;
    const auto seal = read_seal_json(path + ".ckptcheck.seal.json");
    const auto& ranges = seal["files"][0]["tensors"];
    ASSERT_EQ(ranges.size(), 1u) << seal.dump();
    const std::string member = name == "clean_deflated.keras" ? "model.weights.h5" : "model.weights.npz";
    EXPECT_EQ(ranges[0]["name"], member) << seal.dump();
    auto bytes = read_file_bytes(path);
    bytes[ranges[0]["offset"].get<uint64_t>() + ranges[0]["bytes"].get<uint64_t>() / 2] ^= 0x20;
    write_file_bytes(path, bytes);
    const CommandResult v = run_ckptcheck("verify --json " + seal_q(path));
    EXPECT_EQ(v.exit_code, 1) << v.output;
    const auto j = nlohmann::json::parse(v.output, nullptr, false);
    bool named = false;
    for (const auto& e : j["errors"])
      named = named || (e["code"] == "seal_tensor_sha256_mismatch" && e["tensor"] == member);
    EXPECT_TRUE(named) << v.output;
  }
}

}  // namespace
}  // namespace ckpt
