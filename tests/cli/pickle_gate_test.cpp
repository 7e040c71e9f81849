// verify's pickle gate and the options it refuses, through the built binary, on files Debian's
// PyTorch wrote (scripts/make_gate_fixtures.py, scripts/make_pytorch_fixtures.py): a pickle that
// names a code-running callable fails verify in both modes, naming the callable, the file, the
// zip member and the offset; --allow-global accepts a reviewed one; nothing is imported or called.
// Also what torch.load(weights_only=True) reads is read: pre-0.4 tensors and tied weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

const std::string kGate = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/gate/";
const std::string kPytorch = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/";
// What the fixtures would create if anything ever ran them.
const std::string kAttack = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/attack/";
const char* kSentinels[] = {"/tmp/ckptcheck_gate_fixture_was_executed", "/tmp/ckptcheck_fixture_was_executed",
                            "/tmp/ckptcheck_attack_fixture_was_executed"};

nlohmann::json load_json(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

class PickleGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built";
    for (const char* s : kSentinels) std::filesystem::remove(s);
  }
  void TearDown() override {
    for (const char* s : kSentinels) EXPECT_FALSE(std::filesystem::exists(s)) << s << ": a pickle ran";
  }
  // Every code-running fixture with the global torch.load(weights_only=True) refuses in it.
  static std::vector<std::pair<std::string, std::string>> code_fixtures() {
    std::vector<std::pair<std::string, std::string>> out;
    const nlohmann::json gate = load_json(kGate + "expected.json"),
                         pytorch = load_json(kPytorch + "expected.json");
    for (const auto& [file, global] : gate["code"].items())
      out.emplace_back(kGate + file, global.get<std::string>());
    for (const auto& [file, global] : pytorch["malicious"].items())
      out.emplace_back(kPytorch + file, global.get<std::string>());
    return out;
  }
};

TEST_F(PickleGateTest, EveryCodeRunningGlobalFailsVerifyInBothModes) {
  const auto fixtures = code_fixtures();
  ASSERT_GE(fixtures.size(), 13u);
  for (const auto& [file, global] : fixtures) {
    for (const std::string mode : {"", "--weights-only "}) {
      const CommandResult r = run_ckptcheck("verify " + mode + "'" + file + "'");
      EXPECT_EQ(r.exit_code, 1) << mode << file << ": " << r.output;
      const std::string line = "[pickle_global_refused]";
      const size_t at = r.output.find(line);
      ASSERT_NE(at, std::string::npos) << file << ": " << r.output;
      const std::string message = r.output.substr(at, r.output.find('\n', at) - at);
      EXPECT_NE(message.find("'" + global + "'"), std::string::npos) << message;
      EXPECT_NE(message.find(file + ": "), std::string::npos) << "names the file: " << message;
      EXPECT_NE(message.find("/data.pkl @0x"), std::string::npos) << "names member and offset: " << message;
      EXPECT_NE(message.find("torch.load(weights_only=False) would import"), std::string::npos) << message;
      EXPECT_NE(message.find("--allow-global " + global), std::string::npos) << message;
    }
  }
}

TEST_F(PickleGateTest, JsonNamesTheCodeAndTheRefusedGlobal) {
  const CommandResult r =
      run_ckptcheck("verify --json --weights-only '" + kPytorch + "malicious_os_system.pt'");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_FALSE(j["errors"].empty());
  bool found = false;
  for (const auto& e : j["errors"])
    found = found || (e["code"] == "pickle_global_refused" &&
                      e["message"].get<std::string>().find("'posix.system'") != std::string::npos);
  EXPECT_TRUE(found) << r.output;
  EXPECT_EQ(j["kind"], "torch_save");
}

TEST_F(PickleGateTest, AllowGlobalAcceptsOnlyTheReviewedGlobal) {
  const std::string file = kPytorch + "malicious_os_system.pt";
  CommandResult r = run_ckptcheck("verify --weights-only --allow-global posix.system '" + file + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_ckptcheck("verify --weights-only --allow-global os.system '" + file + "'");
  EXPECT_EQ(r.exit_code, 1) << "another spelling is another global: " << r.output;
  // Each line names the file once (it read "malicious_os_system.pt: .../malicious_os_system.pt:").
  EXPECT_NE(r.output.find("\n[pickle_global_refused] " + file + ": malicious_os_system/data.pkl @0x"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\nwarning: [not_sealed] " + file + ": no seal"), std::string::npos) << r.output;
  // Allowing the danger does not switch off the other checks: still no optimizer state.
  r = run_ckptcheck("verify --allow-global posix.system '" + file + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("optimizer_state_missing"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("pickle_global_refused"), std::string::npos) << r.output;
}

TEST_F(PickleGateTest, NeitherASealNorANestedFolderHidesACodeRunningPickle) {
  TempDir root;
  // A sealed directory of files whose kind is otherwise unknown: the seal proves the bytes did not
  // change, not that they are safe.
  const std::string sealed = root / "exported";
  std::filesystem::create_directories(sealed);
  std::filesystem::copy_file(kPytorch + "malicious_os_system.pt", sealed + "/weights.pt");
  ASSERT_EQ(run_ckptcheck("seal '" + sealed + "'").exit_code, 0);
  CommandResult r = run_ckptcheck("verify '" + sealed + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'posix.system'"), std::string::npos) << r.output;
  // An HF folder whose nested global_step*/ holds it.
  const std::string folder = root / "checkpoint-10";
  std::filesystem::create_directories(folder + "/global_step10");
  std::filesystem::copy_file(kPytorch + "model_state.pt", folder + "/pytorch_model.bin");
  std::filesystem::copy_file(kPytorch + "malicious_eval.pt",
                             folder + "/global_step10/mp_rank_00_model_states.pt");
  r = run_ckptcheck("verify --weights-only '" + folder + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("global_step10/mp_rank_00_model_states.pt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[pickle_global_refused]"), std::string::npos) << r.output;
}

const std::string kDcpData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/";

// A writable copy of a fixture directory, its `.metadata` optionally replaced by a hostile one
// (scripts/make_dcp_profile_fixtures.py writes both).
std::string dcp_copy(const TempDir& root, const std::string& fixture, const std::string& metadata = "") {
  const std::string to = root / fixture;
  std::filesystem::copy(kDcpData + fixture, to, std::filesystem::copy_options::recursive);
  if (!metadata.empty())
    write_file_bytes(to + "/.metadata", read_file_bytes(kDcpData + "profile_hostile/" + metadata));
  return to;
}

std::set<std::string> accepted_names(const nlohmann::json& j) {
  std::set<std::string> out;
  for (const auto& a : j["accepted_globals"]) out.insert(a["global"].get<std::string>());
  return out;
}

TEST_F(PickleGateTest, MegatronAndDcp2CheckpointsPassWithNoFlagAndNameWhatTheirProfileAccepted) {
  // Megatron-Core torch_dist: MCoreMetadata, DCP's metadata classes, common.pt's argparse.Namespace.
  CommandResult r = run_ckptcheck("verify --json '" + kDcpData + "megatron_torch_dist'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(accepted_names(j).count("argparse.Namespace")) << r.output;
  // 2 ranks whose planner data names DCP's planner classes and Megatron's MCoreSavePlan.
  r = run_ckptcheck("verify --json '" + kDcpData + "megatron_2rank_planner'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  for (const char* name : {"torch.distributed.checkpoint.planner.WriteItem",
                           "torch.distributed.checkpoint.planner.WriteItemType",
                           "torch.distributed.checkpoint.planner.TensorWriteData",
                           "megatron.core.dist_checkpointing.strategies.torch.MCoreSavePlan"}) {
    EXPECT_TRUE(accepted_names(j).count(name)) << name << ": " << r.output;
  }
  for (const auto& a : j["accepted_globals"]) {
    if (a["global"] == "megatron.core.dist_checkpointing.strategies.torch.MCoreSavePlan") {
      EXPECT_EQ(a["by"], "Megatron-Core dist-checkpointing metadata") << a.dump();
    }
  }
  // DCP 2.x: StorageMeta.checkpoint_id is a pathlib.PosixPath.
  r = run_ckptcheck("verify --weights-only '" + kDcpData + "dcp2_storage_meta'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pickle globals (DCP metadata) in "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", pathlib.PosixPath (called with strings"), std::string::npos) << r.output;
}

TEST_F(PickleGateTest, TheSameGlobalsUsedToRunCodeOrInAnotherKindAreRefused) {
  TempDir root;
  struct Case {
    std::string fixture, metadata, global;
  } cases[] = {
      {"megatron_2rank_planner", "planner_reduce_call.metadata",
       "torch.distributed.checkpoint.planner.WriteItem"},
      {"megatron_2rank_planner", "os_system.metadata", "posix.system"},
      {"dcp2_storage_meta", "path_unlink.metadata", "pathlib.Path.unlink"},
  };
  for (const Case& c : cases) {
    // The clean checkpoint passes: its profile accepts these globals where they are data.
    const CommandResult clean = run_ckptcheck("verify '" + kDcpData + c.fixture + "'");
    EXPECT_EQ(clean.exit_code, 0) << c.fixture << ": " << clean.output;
    TempDir scratch;
    const std::string dir = dcp_copy(scratch, c.fixture, c.metadata);
    for (const std::string mode : {"", "--weights-only "}) {
      const CommandResult r = run_ckptcheck("verify " + mode + "'" + dir + "'");
      EXPECT_EQ(r.exit_code, 1) << c.metadata << ": " << r.output;
      // The file once, as the path the message begins with (never "shard: path/shard:").
      EXPECT_NE(r.output.find("[pickle_global_refused] " + dir + "/.metadata: .metadata @0x"),
                std::string::npos)
          << r.output;
      EXPECT_NE(r.output.find("'" + c.global + "'"), std::string::npos) << c.metadata << ": " << r.output;
    }
  }
  // Megatron's MCoreSavePlan in a plain DCP checkpoint (no metadata.json): not that kind's class.
  const std::string plain = dcp_copy(root, "megatron_2rank_planner");
  std::filesystem::remove(plain + "/metadata.json");
  CommandResult r = run_ckptcheck("verify --weights-only '" + plain + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'megatron.core.dist_checkpointing.strategies.torch.MCoreSavePlan'"),
            std::string::npos)
      << r.output;
  // Megatron's argparse.Namespace in a torch.save file: torch.load refuses it.
  r = run_ckptcheck("verify --weights-only '" + kPytorch + "lightning_like.ckpt'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'argparse.Namespace'"), std::string::npos) << r.output;
}

TEST_F(PickleGateTest, AllowGlobalsFromReadsATeamsReviewedList) {
  TempDir root;
  const std::string list = root.write("reviewed.txt",
                                      "# reviewed 2026-12-01\n"
                                      "os.popen  # a test fixture, known\n"
                                      "\n"
                                      "   argparse.Namespace\n");
  const std::string file = kGate + "code_posix_popen.pt";
  CommandResult r = run_ckptcheck("verify --weights-only '" + file + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run_ckptcheck("verify --json --weights-only --allow-globals-from '" + list + "' '" + file + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["accepted_globals"].size(), 1u) << r.output;
  EXPECT_EQ(j["accepted_globals"][0]["global"], "os.popen");
  EXPECT_EQ(j["accepted_globals"][0]["by"], "reviewed (--allow-global)");
  // A bad list is a usage error naming the file and the line; so is a missing one.
  const std::string bad = root.write("bad.txt", "os.popen\nos.*\n");
  r = run_ckptcheck("verify --weights-only --allow-globals-from '" + bad + "' '" + file + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ":2: 'os.*' is not one MODULE.NAME"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run_ckptcheck("verify --weights-only --allow-globals-from '" + root / "absent.txt" + "' '" + file +
                    "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("absent.txt"), std::string::npos) << r.output;
}

TEST_F(PickleGateTest, InspectKeepsExitZeroAndNamesTheDanger) {
  const CommandResult r = run_ckptcheck("inspect '" + kPytorch + "malicious_os_system.pt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("WARNING"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("posix.system"), std::string::npos) << r.output;
}

TEST_F(PickleGateTest, OptionsAKindCannotHonourAreRefusedNamingOptionAndKind) {
  TempDir root;
  const std::string native = save_training_state(root.path(), full_training_state());
  const std::string safetensors =
      std::string(CKPTCHECK_SOURCE_DIR) +
      "/tests/data/dcp/hf_sharded_safetensors/shard-00001-model-00001-of-00001.safetensors";
  struct Case {
    std::string args, option, kind;
  };
  for (const Case& c :
       {Case{"--allow-global posix.system '" + safetensors + "'", "--allow-global", "safetensors"},
        Case{"--allow-global posix.system '" + native + "'", "--allow-global", "ckptcheck"},
        Case{"--weights-only '" + native + "'", "--weights-only", "ckptcheck"},
        Case{"--against-env '" + kPytorch + "adamw_state.pt'", "--against-env", "torch_save"},
        Case{"--allow-global 'os.*' '" + kPytorch + "adamw_state.pt'", "--allow-global", ""}}) {
    const CommandResult r = run_ckptcheck("verify " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.option), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.kind), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line: " << r.output;
  }
}

// What torch.load(weights_only=True) returns, by name, against what inspect lists.
void expect_reads_as_torch_does(const std::string& file) {
  const auto expected = load_json(kGate + "expected.json")["read"][file];
  const CommandResult r = run_ckptcheck("inspect --json '" + kGate + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  std::map<std::string, nlohmann::json> listed;
  for (const auto& t : j["tensors"]) listed[t["name"]] = t;
  EXPECT_EQ(listed.size(), expected["tensors"].size()) << r.output;
  for (const auto& want : expected["tensors"]) {
    const std::string name = want["name"];
    ASSERT_TRUE(listed.count(name)) << file << ": no tensor " << name << " in " << r.output;
    EXPECT_EQ(listed[name]["dtype"], want["dtype"]) << name;
    EXPECT_EQ(listed[name]["shape"], want["shape"]) << name;
    EXPECT_EQ(listed[name]["sha256"], want["sha256"]) << name;
    const auto alias = expected["aliases"].find(name);
    if (alias != expected["aliases"].end()) {
      EXPECT_EQ(listed[name]["alias_of"], *alias) << name;
    } else {
      EXPECT_FALSE(listed[name].contains("alias_of")) << name;
    }
  }
  for (const auto& g : j["pickle_globals"]) EXPECT_NE(g["risk"], "executes") << g.dump();
}

TEST_F(PickleGateTest, Pre04RebuildTensorIsReadAndPassesTheGate) {
  expect_reads_as_torch_does("pre04_tensors.pt");
  const CommandResult r = run_ckptcheck("verify --weights-only '" + kGate + "pre04_tensors.pt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(PickleGateTest, TiedWeightsAreListedUnderEveryNameAndHashedOnce) {
  expect_reads_as_torch_does("tied_weights.bin");
  expect_reads_as_torch_does("lightning_scores.ckpt");
  CommandResult r = run_ckptcheck("inspect '" + kGate + "tied_weights.bin'");
  EXPECT_NE(r.output.find("alias of embed.weight"), std::string::npos) << r.output;
  r = run_ckptcheck("verify --json --weights-only '" + kGate + "tied_weights.bin'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 8x4 + 4 floats: the shared tensor's bytes are read once.
  EXPECT_EQ(nlohmann::json::parse(r.output)["bytes_hashed"], (8 * 4 + 4) * 4);
  r = run_ckptcheck("verify '" + kGate + "lightning_scores.ckpt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // diff compares by name: both names are compared.
  r = run_ckptcheck("diff --json '" + kGate + "tied_weights.bin' '" + kGate + "tied_weights.bin'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t compared = 0;
  const nlohmann::json diff = nlohmann::json::parse(r.output);
  for (const auto& [name, c] : diff["components"].items()) compared += c["tensors"].get<size_t>();
  EXPECT_EQ(compared, 3u) << r.output;
}

// The parser differentials (issue 63, scripts/make_attack_fixtures.py): files our reader once read
// otherwise than the loader they are meant for, each proven by the real loader running its payload
// when the fixtures were made. Each fails verify in the modes listed, by a refusal of the ambiguity
// (reading_ambiguous), of a program (torchscript_refused) or by naming the call it would run.
TEST_F(PickleGateTest, EveryParserDifferentialIsRefused) {
  const nlohmann::json expected = load_json(kAttack + "expected.json");
  ASSERT_GE(expected["hostile"].size(), 20u);
  std::set<int> classes;
  for (const auto& [file, want] : expected["hostile"].items()) {
    classes.insert(want["class"].get<int>());
    for (const auto& mode : want["refuse"]) {
      const CommandResult r =
          run_ckptcheck("verify --json " + mode.get<std::string>() + " '" + kAttack + file + "'");
      EXPECT_EQ(r.exit_code, 1) << mode << " " << file << ": " << r.output;
      const auto j = nlohmann::json::parse(r.output, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << file << ": --json printed no JSON: " << r.output;
      std::string codes, messages;
      for (const auto& e : j["errors"]) {
        codes += e["code"].get<std::string>() + " ";
        messages += e["message"].get<std::string>() + "\n";
      }
      const bool refused_whole = codes.find("reading_ambiguous") != std::string::npos ||
                                 codes.find("torchscript_refused") != std::string::npos;
      EXPECT_TRUE(refused_whole || codes.find("pickle_global_refused") != std::string::npos ||
                  codes.find("keras_code_refused") != std::string::npos)
          << file << ": refused for another reason than the gate's: " << codes << "\n"
          << messages;
      if (refused_whole) continue;  // the structure is refused: no one reading to name calls from
      for (const auto& name : want["names"])
        EXPECT_NE(messages.find(name.get<std::string>()), std::string::npos) << file << ": " << messages;
    }
  }
  for (int c : {1, 2, 3, 4, 5, 6, 7, 9, 10}) EXPECT_TRUE(classes.count(c)) << "no fixture for class " << c;
}

// The other side of every rule: what torch.load(weights_only=True) reads, in every pickle protocol
// and both formats, still passes --weights-only, each tensor as torch read it.
TEST_F(PickleGateTest, LegitimateFilesOfEveryProtocolPass) {
  const nlohmann::json expected = load_json(kAttack + "expected.json");
  ASSERT_GE(expected["legit"].size(), 8u);
  for (const auto& [file, want] : expected["legit"].items()) {
    const CommandResult r = run_ckptcheck("verify --weights-only '" + kAttack + file + "'");
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.output;
    const CommandResult listed = run_ckptcheck("inspect --json '" + kAttack + file + "'");
    ASSERT_EQ(listed.exit_code, 0) << file << ": " << listed.output;
    const auto j = nlohmann::json::parse(listed.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << listed.output;
    const auto key = [](const nlohmann::json& t) {
      return t["name"].get<std::string>() + " " + t["dtype"].get<std::string>() + " " + t["shape"].dump() +
             " " + t["sha256"].get<std::string>();
    };
    std::set<std::string> ours, torch;
    for (const auto& t : j["tensors"]) ours.insert(key(t));
    for (const auto& t : want["tensors"]) torch.insert(key(t));
    EXPECT_EQ(ours, torch) << file;
  }
}

// A quantized tensor's storage (torch.QInt8Storage) is one this reader does not read: the gate refuses
// the file, naming the storage type, where it called a valid file damaged ("bad persistent id").
TEST_F(PickleGateTest, AStorageTypeTheReaderDoesNotKnowIsRefusedByName) {
  TempDir dir;
  const std::string path = dir / "q.pt";
  const CommandResult made = torch_save_with_python(
      "{'t': torch.quantize_per_tensor(torch.tensor([1., 2.]), 0.1, 0, torch.qint8)}", path);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const CommandResult r = run_ckptcheck("verify --weights-only '" + path + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("storage type torch.QInt8Storage"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad persistent id"), std::string::npos) << r.output;
  EXPECT_EQ(run_ckptcheck("inspect '" + path + "'").exit_code, 2)
      << "not supported: a usage error, not damage";
}

// A file torch.load itself cannot load (protocol 0 writes persistent ids as text) is no pass.
TEST_F(PickleGateTest, FilesTorchCannotLoadDoNotPass) {
  const nlohmann::json expected = load_json(kAttack + "expected.json");
  for (const auto& [file, why] : expected["unloadable"].items()) {
    const CommandResult r = run_ckptcheck("verify --weights-only '" + kAttack + file + "'");
    EXPECT_EQ(r.exit_code, 1) << file << " (" << why << "): " << r.output;
  }
}

// A seal vouches for the bytes of the file it is found beside: copied beside another file it fails
// naming both; renamed together with its file it verifies (best.pt promoted from ckpt_10.pt).
TEST_F(PickleGateTest, ASealChecksTheFileItIsFoundBeside) {
  TempDir dir;
  const std::string good = dir / "good.pt", other = dir / "other.pt", best = dir / "best.pt";
  std::filesystem::copy_file(kAttack + "legit_proto2.pt", good);
  std::filesystem::copy_file(kAttack + "legit_proto4.pt", other);
  ASSERT_EQ(run_ckptcheck("seal '" + good + "'").exit_code, 0);
  std::filesystem::copy_file(good + ".ckptcheck.seal.json", other + ".ckptcheck.seal.json");
  CommandResult r = run_ckptcheck("verify --weights-only '" + other + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("was made for 'good.pt'"), std::string::npos) << r.output;
  std::filesystem::rename(good, best);
  std::filesystem::rename(good + ".ckptcheck.seal.json", best + ".ckptcheck.seal.json");
  r = run_ckptcheck("verify --weights-only '" + best + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("seal_file_renamed"), std::string::npos) << r.output;
}

// A file with a magic of its own that torch.load reads as a pickle too: ckptcheck's "CKPTSHD\0"
// starts with SHORT_BINBYTES, which skips 75 bytes, and a pickle may follow. Named as the pickle it is
// to a loader, never passed as a shard.
TEST_F(PickleGateTest, AShardMagicFollowedByAPickleIsJudgedAsThePickle) {
  TempDir dir;
  std::string bytes("CKPTSHD\0", 8);
  bytes.resize(77, ' ');
  bytes += "cposix\nsystem\n(S'touch /tmp/ckptcheck_attack_fixture_was_executed'\ntR.";
  const std::string file = dir.write("polyglot.pt", bytes);
  for (const std::string mode : {"", "--weights-only "}) {
    const CommandResult r = run_ckptcheck("verify --json " + mode + "'" + file + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("pickle_global_refused"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("posix.system"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace ckpt
