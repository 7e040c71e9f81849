// One conformance suite for `verify`: every checkpoint kind goes through the same cases, as a user
// runs them (the built binary, exit codes, --json). A kind is a directory or file written by
// ckptcheck, by Debian's PyTorch (tests/data, scripts/make_pytorch_fixtures.py) or by other people's
// software (../shared/realworld-samples). The cases:
//   clean passes; a truncated payload file fails; a flipped payload byte fails when a seal covers the
//   checkpoint (and, unsealed, exactly when the kind records a checksum of its own); --pubkey fails
//   without a seal, with an unsigned seal and with another key's signature, and passes signed;
//   --json has one schema; --jobs 1 and --jobs 4 report the same; --quick reads no payload byte.
// The binary under test must exist: a missing or broken binary fails these tests, never skips them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

const std::string kData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/";
const std::string kRealWorld = std::string(CKPTCHECK_SOURCE_DIR) + "/../shared/realworld-samples/";

// Where a kind's payload lives: the file (relative to the checkpoint, "" for a lone file) and a
// byte inside a tensor's payload.
struct PayloadByte {
  std::string file;
  uint64_t offset = 0;
};

struct Kind {
  std::string name;     // as `verify --json` reports it
  std::string fixture;  // a path to copy, or "" when make() writes it
  std::string args;     // what a clean copy needs to pass (--weights-only for weights-only files)
  bool own_checksums;   // an unsealed copy catches a flipped payload byte (CRC-32, manifest hashes)
  bool signs_manifest;  // ckptcheck's own: `sign` signs manifest.json, no seal is needed
  std::function<std::string(const std::string&)> make;  // writes the checkpoint under a root
  // The largest range a seal names holds structure, not only tensor bytes (a deflated .keras member:
  // model.weights.h5 or .npz must be inflated to find its tensors; a DCP bytes item larger than any
  // tensor: a pickle), so --quick reads those bytes and a flipped one fails it too, named by its file
  // or member; every other kind's --quick reads no payload byte.
  bool structure_in_payload = false;
};

void PrintTo(const Kind& k, std::ostream* os) {
  *os << k.name << " (" << (k.fixture.empty() ? "written by the test" : k.fixture) << ")";
}

std::string copy_fixture(const std::string& from, const std::string& root) {
  const std::string to = root + "/" + fs::path(from).filename().string();
  fs::copy(from, to, fs::copy_options::recursive);
  // ../shared is read-only: the copies are damaged on purpose, so they must be writable.
  fs::permissions(to, fs::perms::owner_all, fs::perm_options::add);
  if (fs::is_directory(to)) {
    for (const auto& e : fs::recursive_directory_iterator(to))
      fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  }
  return to;
}

std::string model_folder(const std::string& root) {
  const std::string dir = root + "/checkpoint-7";
  fs::create_directories(dir);
  fs::copy_file(kData + "pytorch/model_state.pt", dir + "/pytorch_model.bin");
  fs::copy_file(kData + "pytorch/adamw_state.pt", dir + "/optimizer.pt");
  return dir;
}

// A sharded safetensors model: two shards and the index that maps each tensor to one.
std::string sharded_index(const std::string& root) {
  const std::string dir = root + "/sharded";
  fs::create_directories(dir);
  const std::string from = kData + "dcp/hf_sharded_safetensors/";
  const std::string a = "shard-00001-model-00001-of-00001.safetensors";
  const std::string b = "shard-00002-model-00001-of-00001.safetensors";
  fs::copy_file(from + a, dir + "/" + a);
  fs::copy_file(from + b, dir + "/" + b);
  const nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                                {"weight_map",
                                 {{"optim.state.steps", a},
                                  {"model.layers.0.weight", b},
                                  {"model.embed.weight", b},
                                  {"model.layers.0.bias", b}}}};
  const std::string text = index.dump();
  write_file_bytes(dir + "/model.safetensors.index.json", std::vector<uint8_t>(text.begin(), text.end()));
  return dir + "/model.safetensors.index.json";
}

std::vector<Kind> kinds() {
  return {
      {"ckptcheck", "", "", true, true,
       [](const std::string& root) { return save_training_state(root, full_training_state()); }},
      // Version 2: the chunk records are in the shard headers only (shards/shard_header_chunks.h).
      {"ckptcheck", "", "", true, true,
       [](const std::string& root) {
         return save_training_state(root, full_training_state(), kFixtureStep, 3, "native",
                                    ChunkRecords::kInShardHeaders);
       }},
      // One committed checkpoint of each manifest version, written by `ckptcheck train` (version 1,
      // as every build before 2026-12 wrote) and `convert --manifest-version 2`: both keep verifying.
      {"ckptcheck", kData + "native/manifest_v1", "", true, true, nullptr},
      {"ckptcheck", kData + "native/manifest_v2", "", true, true, nullptr},
      {"dcp", kData + "dcp/torch113", "--weights-only", true, false, nullptr},
      {"dcp", kRealWorld + "dcp-lightning-2rank", "", true, false, nullptr},
      // Megatron's common.pt pickles its argparse.Namespace: its kind's trust profile accepts it as data.
      {"megatron_torch_dist", kData + "dcp/megatron_torch_dist", "", true, false, nullptr},
      // 2 ranks whose planner data names DCP's planner classes and Megatron's MCoreSavePlan.
      {"megatron_torch_dist", kData + "dcp/megatron_2rank_planner", "", true, false, nullptr},
      // DCP 2.x: StorageMeta carries a pathlib.PosixPath.
      {"dcp", kData + "dcp/dcp2_storage_meta", "", true, false, nullptr},
      {"torch_save", kData + "pytorch/adamw_state.pt", "", true, false, nullptr},
      {"torch_save", kData + "gate/lightning_scores.ckpt", "", true, false, nullptr},
      // A program: it passes only as what it is (kind torchscript), never under --weights-only.
      {"torchscript", kData + "pytorch/torchscript_tiny.pt", "", true, false, nullptr},
      {"torch_save_legacy", kData + "pytorch/legacy_model_state.pt", "--weights-only", false, false, nullptr},
      {"torch_save_legacy", kRealWorld + "torch-legacy/pytorch_model.bin", "--weights-only", false, false,
       nullptr},
      {"safetensors", kData + "dcp/hf_sharded_safetensors/shard-00001-model-00001-of-00001.safetensors",
       "--weights-only", false, false, nullptr},
      {"hdf5", kData + "gate/clean_weights.h5", "--weights-only", false, false, nullptr},
      {"hdf5", kData + "gate/keras_clean.h5", "--weights-only", false, false, nullptr},
      {"model_folder", "", "--weights-only", true, false, model_folder},
      // The trainers' folders in their real layouts (scripts/make_trainer_fixtures.py).
      {"hf_trainer", kData + "trainers/hf/checkpoint-10", "", false, false, nullptr},
      {"accelerate", kData + "trainers/accelerate/save_state_bin", "", true, false, nullptr},
      {"deepspeed", kData + "trainers/deepspeed/zero2", "", true, false, nullptr},
      // The Trainer and save_state under an engine: DeepSpeed's tag folder or FSDP's DCP folders inside.
      {"hf_trainer", kData + "trainers/hf/checkpoint-10-deepspeed", "", true, false, nullptr},
      {"hf_trainer", kData + "trainers/hf/checkpoint-10-fsdp", "", true, false, nullptr, true},
      {"accelerate", kData + "trainers/accelerate/save_state_deepspeed", "", true, false, nullptr},
      {"safetensors_index", "", "--weights-only", false, false, sharded_index},
      // Keras 3 archives: each stored member's tensors have their own byte ranges (an .h5's datasets,
      // an .npz's arrays); the zip's CRC-32s catch a flipped byte unsealed. A deflated member is one
      // range, and --quick inflates it to find the tensors (structure_in_payload).
      {"keras", kData + "trainers/keras/clean.keras", "", true, false, nullptr},
      {"keras", kData + "trainers/keras/clean_npz.keras", "", true, false, nullptr},
      {"keras", kData + "trainers/keras/clean_deflated.keras", "", true, false, nullptr, true},
      {"keras", kData + "trainers/keras/clean_npz_deflated.keras", "", true, false, nullptr, true},
  };
}

std::string q(const std::string& s) {
  return "'" + s + "'";
}

class VerifyConformanceTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built: the suite needs it";
    const Kind& k = GetParam();
    if (!k.fixture.empty() && k.fixture.rfind(kRealWorld, 0) == 0 && !fs::exists(k.fixture))
      GTEST_SKIP() << "real-world sample absent (../shared beside the checkout): " << k.fixture;
    ASSERT_TRUE(write_ed25519_key_pair(keys_ / "k.pem", keys_ / "k.pub").is_ok());
    ASSERT_TRUE(write_ed25519_key_pair(keys_ / "other.pem", keys_ / "other.pub").is_ok());
  }

  std::string fresh_copy() {
    const Kind& k = GetParam();

    const std::string root = roots_.path() + "/" + std::to_string(copies_++);
    fs::create_directories(root);
    return k.make ? k.make(root) : copy_fixture(k.fixture, root);
  }

  CommandResult verify(const std::string& path, const std::string& extra = "") {
    return run_ckptcheck("verify " + GetParam().args + " " + extra + " " + q(path));
  }
  nlohmann::json verify_json(const std::string& path, const std::string& extra, int expect_exit) {
    const CommandResult r = verify(path, "--json " + extra);
    EXPECT_EQ(r.exit_code, expect_exit) << r.output;
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.output;
    return j;
  }

  // Seals a checkpoint (ckptcheck's own needs none: its manifest holds the hashes). `seal` and
  // `sign` take the path verify takes, and the registry says where the seal goes: `seal --json`
  // names it, and this returns it ("" for ckptcheck's own).
  std::string seal(const std::string& path) {
    if (GetParam().signs_manifest) return "";
    const CommandResult r = run_ckptcheck("seal --json " + q(path));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    EXPECT_TRUE(j.contains("seal")) << r.output;
    return j.value("seal", "");
  }
  // The folder a path's payload files are named from: the path itself, or a lone file's folder.
  static std::string base_of(const std::string& path) {
    return fs::is_directory(path) ? path : fs::path(path).parent_path().string();
  }
  void sign(const std::string& path, const std::string& key) {
    const CommandResult r = run_ckptcheck("sign " + q(path) + " --key " + q(keys_ / key));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // The largest tensor payload of the checkpoint, located through the records that name byte ranges:
  // the manifest for ckptcheck's own, a seal of a scratch copy for every other kind.
  PayloadByte payload_byte(const std::string& path) {
    PayloadByte out;
    uint64_t best = 0;
    if (GetParam().signs_manifest) {
      const Manifest m = read_fixture_manifest(path);
      for (const auto& t : m.tensors) {
        for (const auto& c : t.chunks) {
          if (c.data_bytes <= best) continue;
          best = c.data_bytes;
          out = {m.shards[c.shard].path, c.data_offset + c.data_bytes / 2};
        }
      }
      return out;
    }
    const std::string scratch = fresh_copy();
    const std::string seal_path = seal(scratch);
    // A folder's seal lies in it and names its files from it (a sharded index's: the folder of the
    // shards; a trainer's found from above: the checkpoint folder); a file's lies beside it.
    const bool folder_seal = fs::path(seal_path).filename() == "ckptcheck.seal.json";
    const std::string from =
        folder_seal ? fs::relative(fs::path(seal_path).parent_path(), base_of(scratch)).string() : "";
    const auto bytes = read_file_bytes(seal_path);
    const auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
    for (const auto& f : j["files"]) {
      for (const auto& t : f["tensors"]) {
        const uint64_t n = t["bytes"];
        if (n <= best) continue;
        best = n;
        out = {folder_seal ? (fs::path(from) / f["path"].get<std::string>()).lexically_normal().string() : "",
               t["offset"].get<uint64_t>() + n / 2};
      }
    }
    EXPECT_GT(best, 0u) << "no tensor payload found for " << path;
    return out;
  }

  static std::string file_of(const std::string& path, const PayloadByte& b) {
    return b.file.empty() ? path : base_of(path) + "/" + b.file;
  }
  void flip(const std::string& path, const PayloadByte& b) {
    auto bytes = read_file_bytes(file_of(path, b));
    ASSERT_LT(b.offset, bytes.size());
    bytes[b.offset] ^= 0x20;
    write_file_bytes(file_of(path, b), bytes);
  }
  void truncate_payload_file(const std::string& path, const PayloadByte& b) {
    const std::string f = file_of(path, b);
    fs::resize_file(f, b.offset);
  }

  TempDir roots_;
  TempDir keys_;
  int copies_ = 0;
};

TEST_P(VerifyConformanceTest, CleanCopyPassesAndNamesItsKind) {
  const std::string path = fresh_copy();
  const auto j = verify_json(path, "", 0);
  EXPECT_EQ(j["kind"], GetParam().name);
  EXPECT_EQ(j["ok"], true);
  EXPECT_GT(j["tensors"].get<size_t>(), 0u);
}

TEST_P(VerifyConformanceTest, TruncatedPayloadFileFails) {
  const std::string path = fresh_copy();
  truncate_payload_file(path, payload_byte(path));
  const CommandResult r = verify(path);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("FAIL ", 0), 0u) << r.output;
}

TEST_P(VerifyConformanceTest, FlippedPayloadByteFailsWhenSealedAndWhereTheKindHasChecksums) {
  const std::string unsealed = fresh_copy();
  flip(unsealed, payload_byte(unsealed));
  const auto j = verify_json(unsealed, "", GetParam().own_checksums ? 1 : 0);
  if (!GetParam().own_checksums) {
    // Nothing recorded a hash: the report must say so rather than look like a clean bill.
    bool not_sealed = false;
    for (const auto& w : j["warnings"]) not_sealed = not_sealed || w["code"] == "not_sealed";
    EXPECT_TRUE(not_sealed) << j.dump();
  }
  const std::string sealed = fresh_copy();
  const PayloadByte b = payload_byte(sealed);
  seal(sealed);
  flip(sealed, b);
  EXPECT_EQ(verify(sealed).exit_code, 1);
}

TEST_P(VerifyConformanceTest, PubkeyNeedsAValidSignatureOfThisKey) {
  const std::string pub = q(keys_ / "k.pub");
  const std::string path = fresh_copy();
  CommandResult r = verify(path, "--pubkey " + pub);
  EXPECT_EQ(r.exit_code, 1) << "--pubkey without a seal or signature: " << r.output;
  EXPECT_NE(r.output.find("signature_missing"), std::string::npos) << r.output;
  seal(path);
  r = verify(path, "--pubkey " + pub);
  EXPECT_EQ(r.exit_code, 1) << "sealed but unsigned: " << r.output;
  sign(path, "other.pem");
  r = verify(path, "--pubkey " + pub);
  EXPECT_EQ(r.exit_code, 1) << "signed with another key: " << r.output;
  const std::string signed_copy = fresh_copy();
  seal(signed_copy);
  sign(signed_copy, "k.pem");
  r = verify(signed_copy, "--pubkey " + pub);
  EXPECT_EQ(r.exit_code, 0) << "signed: " << r.output;
  EXPECT_EQ(verify(signed_copy, "--pubkey " + q(keys_ / "absent.pub")).exit_code, 2);
}

TEST_P(VerifyConformanceTest, JsonHasTheSameSchemaForEveryKind) {
  static const std::set<std::string> kKeys = {
      "ok",           "path",          "kind",        "sealed",           "step",
      "errors",       "warnings",      "uncommitted", "shards",           "tensors",
      "bytes_hashed", "sha256_kernel", "seconds",     "accepted_globals", "resume_state"};
  const std::string path = fresh_copy();
  const auto j = verify_json(path, "", 0);
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  EXPECT_EQ(keys, kKeys) << j.dump();
  for (const auto& e : j["warnings"]) {
    EXPECT_TRUE(e.contains("code") && e.contains("shard") && e.contains("tensor") && e.contains("message"))
        << e.dump();
  }
}

TEST_P(VerifyConformanceTest, JobsOneAndFourReportTheSame) {
  const std::string path = fresh_copy();
  flip(path, payload_byte(path));  // a report with findings, not only a clean one
  const CommandResult one = verify(path, "--json --jobs 1");
  const CommandResult four = verify(path, "--json --jobs 4");
  EXPECT_EQ(one.exit_code, four.exit_code);
  auto a = nlohmann::json::parse(one.output), b = nlohmann::json::parse(four.output);
  a.erase("seconds");
  b.erase("seconds");
  EXPECT_EQ(a, b);
}

TEST_P(VerifyConformanceTest, QuickReadsNoPayloadByte) {
  const std::string path = fresh_copy();
  const PayloadByte b = payload_byte(path);
  seal(path);
  EXPECT_EQ(verify_json(path, "--quick", 0)["bytes_hashed"], 0);
  flip(path, b);
  if (GetParam().structure_in_payload) {
    const auto j = verify_json(path, "--quick", 1);
    EXPECT_NE(j.dump().find(b.file.empty() ? "model.weights" : b.file), std::string::npos)
        << "the inflated member is named: " << j.dump();
  } else {
    EXPECT_EQ(verify(path, "--quick").exit_code, 0)
        << "--quick reads no payload, so a flipped payload byte passes";
  }
  EXPECT_EQ(verify(path).exit_code, 1);
  truncate_payload_file(path, b);
  EXPECT_EQ(verify(path, "--quick").exit_code, 1) << "sizes are checked even with --quick";
}

INSTANTIATE_TEST_SUITE_P(EveryKind, VerifyConformanceTest, ::testing::ValuesIn(kinds()),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param.name + "_" + std::to_string(info.index);
                         });

// The refusals, for every kind that can carry code: a hostile variant fails verify in both modes,
// unsealed and sealed (a seal proves the bytes did not change, not that they are safe), with its
// own error code naming what would run.
struct Refusal {
  std::string kind;     // as `verify --json` reports it
  std::string fixture;  // the clean checkpoint
  std::string replace;  // "" or "<relative file>=<data file>": the hostile part put in its place
  std::string code;     // the error code
  std::string names;    // what the message names
};

void PrintTo(const Refusal& r, std::ostream* os) {
  *os << r.kind << " " << r.fixture << " " << r.replace;
}

std::vector<Refusal> refusals() {
  const std::string hostile = "dcp/profile_hostile/";
  return {
      {"torch_save", "gate/code_posix_popen.pt", "", "pickle_global_refused", "'os.popen'"},
      {"torchscript", "pytorch/torchscript_hostile.pt", "", "pickle_global_refused", "'posix.system'"},
      {"dcp", "dcp/dcp2_storage_meta", ".metadata=" + hostile + "path_unlink.metadata",
       "pickle_global_refused", "'pathlib.Path.unlink'"},
      {"megatron_torch_dist", "dcp/megatron_2rank_planner",
       ".metadata=" + hostile + "planner_reduce_call.metadata", "pickle_global_refused",
       "'torch.distributed.checkpoint.planner.WriteItem'"},
      {"megatron_torch_dist", "dcp/megatron_2rank_planner", ".metadata=" + hostile + "os_system.metadata",
       "pickle_global_refused", "'posix.system'"},
      {"hdf5", "gate/keras_lambda.h5", "", "keras_code_refused", "layer 'scale_by_two' (Lambda)"},
  };
}

class VerifyRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(VerifyRefusalTest, HostileVariantFailsInBothModesSealedOrNot) {
  ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built: the suite needs it";
  const Refusal& c = GetParam();
  TempDir root;
  const std::string path = copy_fixture(kData + c.fixture, root.path());
  if (!c.replace.empty()) {
    const size_t eq = c.replace.find('=');
    write_file_bytes(path + "/" + c.replace.substr(0, eq), read_file_bytes(kData + c.replace.substr(eq + 1)));
  }
  for (const bool sealed : {false, true}) {
    if (sealed) {
      ASSERT_EQ(run_ckptcheck("seal " + q(path)).exit_code, 0);
    }
    for (const std::string mode : {"", "--weights-only "}) {
      const CommandResult r = run_ckptcheck("verify --json " + mode + q(path));
      EXPECT_EQ(r.exit_code, 1) << r.output;
      const auto j = nlohmann::json::parse(r.output, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << r.output;
      EXPECT_EQ(j["kind"], c.kind);
      EXPECT_EQ(j["sealed"], sealed);
      bool named = false;
      for (const auto& e : j["errors"])
        named = named ||
                (e["code"] == c.code && e["message"].get<std::string>().find(c.names) != std::string::npos);
      EXPECT_TRUE(named) << c.code << " naming " << c.names << ": " << r.output;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCodeCarryingKind, VerifyRefusalTest, ::testing::ValuesIn(refusals()),
                         [](const ::testing::TestParamInfo<Refusal>& info) {
                           return info.param.kind + "_" + std::to_string(info.index);
                         });

}  // namespace
}  // namespace ckpt
