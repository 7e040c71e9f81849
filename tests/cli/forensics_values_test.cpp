// Forensics that never says "identical" wrongly (issue 65): diff compares every value of the state,
// not only tensors, and says in one line when a file is another step; a single file's step is read
// from its state and must agree with its optimizer and scheduler. Files written by Debian's PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

// torch.save of the same tensors with `step`, a scheduler's last_epoch and an optimizer's step.
std::string save_state(const TempDir& dir, const std::string& name, int step, int last_epoch,
                       int optimizer_step) {
  const std::string path = dir / name;
  const CommandResult r = run_command(
      "/usr/bin/python3 -c \"import torch; torch.manual_seed(0); w = torch.randn(4, 3); "
      "torch.save({'model': {'w': w}, 'step': " +
      std::to_string(step) + ", 'data': {'epoch': 0, 'position': 7}, 'scheduler': {'last_epoch': " +
      std::to_string(last_epoch) + ", 'base_lrs': [0.1], '_step_count': " + std::to_string(last_epoch + 1) +
      "}, 'optimizer': {'state': {0: {'step': torch.tensor(" + std::to_string(optimizer_step) +
      ".), 'exp_avg': torch.zeros(4, 3), 'exp_avg_sq': torch.zeros(4, 3)}}, 'param_groups': [{'lr': 0.1, "
      "'params': [0]}]}}, '" +
      path + "')\"");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return path;
}

TEST(ForensicsValues, DiffSaysDifferentForAnotherStepWithTheSameTensors) {
  TempDir dir;
  const std::string a = save_state(dir, "a.pt", 20, 20, 20), b = save_state(dir, "b.pt", 15, 3, 20);
  CommandResult r = run_ckptcheck("diff '" + a + "' '" + b + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("DIFF ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("step 20 vs 15 (b is an older checkpoint"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scheduler.last_epoch: 20 vs 3"), std::string::npos) << r.output;
  EXPECT_LT(r.output.find("step 20 vs 15"), r.output.find("values:")) << "the headline comes first";
  r = run_ckptcheck("diff --json '" + a + "' '" + b + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_FALSE(j["identical"].get<bool>());
  bool saw_step = false;
  for (const auto& v : j["values"])
    saw_step = saw_step || (v["path"] == "step" && v["a"] == 20 && v["b"] == 15);
  EXPECT_TRUE(saw_step) << r.output;
  // The same file twice is still SAME.
  EXPECT_EQ(run_ckptcheck("diff '" + a + "' '" + a + "'").exit_code, 0);
}

// Values JSON cannot tell apart (issue 65 item 9): a tuple and a list, two byte strings that are not
// UTF-8 (lone surrogates, which pickle writes with 'surrogatepass'), an int and a float. A set whose
// order differs, and one wide int written by both, are the same state.
TEST(ForensicsValues, DiffComparesTypedValuesNotTheirJson) {
  TempDir dir;
  const auto save = [&](const std::string& name, const std::string& values) {
    const std::string path = dir / name;
    const CommandResult r = run_command(
        "/usr/bin/python3 -c \"import torch; torch.manual_seed(0); w = torch.randn(2, 2); "
        "torch.save({'model': {'w': w}, " +
        values + "}, '" + path + "')\"");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return path;
  };
  const std::string a = save("a.pt",
                             "'betas': (0.9, 0.999), 'name': '\\udcff', 'count': 3, 'big': 2**70, "
                             "'tags': set(['x', 'y', 'z']), 'frozen': frozenset([1])");
  const std::string b = save("b.pt",
                             "'betas': [0.9, 0.999], 'name': '\\udcfe', 'count': 3.0, 'big': 2**70, "
                             "'tags': set(['z', 'y', 'x']), 'frozen': frozenset([1])");
  CommandResult r = run_ckptcheck("diff '" + a + "' '" + b + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("values: 3 differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("betas: (0.9, 0.999) (tuple) vs [0.9, 0.999] (list)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("count: 3 (int) vs 3.0 (float)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("name: '\\xed\\xb3\\xbf' vs '\\xed\\xb3\\xbe'"), std::string::npos) << r.output;
  r = run_ckptcheck("diff --json '" + a + "' '" + b + "'");
  const auto j = nlohmann::json::parse(r.output);
  std::map<std::string, nlohmann::json> by_path;
  for (const auto& v : j["values"]) by_path[v["path"].get<std::string>()] = v;
  ASSERT_EQ(by_path.size(), 3u) << r.output;
  EXPECT_EQ(by_path["betas"]["a_type"], "tuple");
  EXPECT_EQ(by_path["betas"]["b_type"], "list");
  EXPECT_EQ(by_path["count"]["b_repr"], "3.0");
  EXPECT_EQ(by_path.count("tags") + by_path.count("big") + by_path.count("frozen"), 0u) << r.output;
  // The same values written again (a new process: another hash seed orders the set anew) are SAME.
  const std::string a2 = save("a2.pt",
                              "'betas': (0.9, 0.999), 'name': '\\udcff', 'count': 3, 'big': 2**70, "
                              "'tags': set(['y', 'z', 'x']), 'frozen': frozenset([1])");
  r = run_ckptcheck("diff '" + a + "' '" + a2 + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// What a white-box review found SAME: an optimizer state keyed '0' where the other is keyed 0 (a JSON
// round trip does that, and load_state_dict then drops the moments), a tensor of 0.0 against one of
// -0.0 at diff's zero tolerance ("1 of 1 elements differ", yet SAME), and a Trainer folder whose
// adapter_config.json changed lora_alpha.
TEST(ForensicsValues, KeysOfAnotherTypeSignedZerosAndConfigFilesDiffer) {
  TempDir dir;
  const auto save = [&](const std::string& name, const std::string& expr) {
    const std::string path = dir / name;
    const CommandResult r = torch_save_with_python(expr, path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return path;
  };
  const std::string int_key = save("k_int.pt", "{'opt': {'state': {0: {'lr': 1.0}}}}");
  const std::string str_key = save("k_str.pt", "{'opt': {'state': {'0': {'lr': 1.0}}}}");
  CommandResult r = run_ckptcheck("diff '" + int_key + "' '" + str_key + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("opt.state.0 (int key): {'lr': 1.0} in a, absent in b"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("opt.state.0 (str key): absent in a"), std::string::npos) << r.output;
  EXPECT_EQ(run_ckptcheck("diff '" + int_key + "' '" + int_key + "'").exit_code, 0);
  // Two tensors whose paths spell one name ('a.b' beside a -> b; 0 beside '0') stay two tensors: the
  // later one is listed as NAME#2 (they were merged into one, "OK", and diff called the file corrupt).
  const std::string dotted = save("dot.pt", "{'x': {'a.b': torch.ones(2), 'a': {'b': torch.zeros(2)}}}");
  const std::string swapped = save("dot2.pt", "{'x': {'a.b': torch.zeros(2), 'a': {'b': torch.ones(2)}}}");
  r = run_ckptcheck("inspect --json '" + dotted + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> names;
  const nlohmann::json listed = nlohmann::json::parse(r.output);  // held: the loop reads into it
  for (const auto& t : listed["tensors"]) names.insert(t.value("name", ""));
  EXPECT_EQ(names, (std::set<std::string>{"x.a.b", "x.a.b#2"})) << r.output;
  r = run_ckptcheck("diff '" + dotted + "' '" + swapped + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("x.a.b#2: 2 of 2 elements differ"), std::string::npos) << r.output;
  const std::string mixed = save("mixed.pt", "{'s': {0: torch.ones(2), '0': torch.zeros(3)}}");
  EXPECT_EQ(run_ckptcheck("diff '" + mixed + "' '" + mixed + "'").exit_code, 0);
  // A model folder holding the same weights as model.safetensors and pytorch_model.bin (common on the
  // Hub): the safetensors' names are the model's (from_pretrained reads them), the .bin's under its
  // file, never one tensor of two chunks ("OK"; diff of the folder with itself said corrupt).
  const std::string folder = dir / "hub";
  std::filesystem::create_directories(folder);
  save("hub/pytorch_model.bin", "{'w': torch.arange(12.).reshape(3, 4)}");
  const CommandResult made = run_command(
      "/usr/bin/python3 -c \"import json, struct, torch; w = torch.arange(12.).reshape(3, "
      "4).numpy().tobytes(); "
      "h = json.dumps({'w': {'dtype': 'F32', 'shape': [3, 4], 'data_offsets': [0, 48]}}).encode(); "
      "h += b' ' * (-len(h) % 8); open('" +
      folder + "/model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + w)\"");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  write_file_bytes(folder + "/config.json", {'{', '}'});
  r = run_ckptcheck("inspect --json '" + folder + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json hub = nlohmann::json::parse(r.output);
  std::set<std::string> hub_names;
  for (const auto& t : hub["tensors"]) hub_names.insert(t.value("name", ""));
  EXPECT_TRUE(hub_names.count("pytorch_model.bin/w")) << r.output;
  EXPECT_EQ(run_ckptcheck("diff '" + folder + "' '" + folder + "'").exit_code, 0);

  const std::string zero = save("z.pt", "{'t': torch.tensor([0.0, 1.0])}");
  const std::string negative_zero = save("nz.pt", "{'t': torch.tensor([-0.0, 1.0])}");
  r = run_ckptcheck("diff '" + zero + "' '" + negative_zero + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("t: 1 of 2 elements differ"), std::string::npos) << r.output;
  // Asked for a tolerance, equal numbers are within it.
  EXPECT_EQ(run_ckptcheck("diff --atol 1e-9 '" + zero + "' '" + negative_zero + "'").exit_code, 0);

  const std::string peft = dir / "peft";
  std::filesystem::copy(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/trainers/hf/checkpoint-10-peft",
                        peft, std::filesystem::copy_options::recursive);
  const std::string config = peft + "/adapter_config.json";
  write_file_bytes(config, [&] {
    std::string text = replaced_once(read_text_file(config), "\"lora_alpha\": 4", "\"lora_alpha\": 99");
    return std::vector<uint8_t>(text.begin(), text.end());
  }());
  r = run_ckptcheck("diff '" + std::string(CKPTCHECK_SOURCE_DIR) +
                    "/tests/data/trainers/hf/checkpoint-10-peft' '" + peft + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("adapter_config.json.lora_alpha: 4 vs 99"), std::string::npos) << r.output;
}

TEST(ForensicsValues, VerifyReadsTheStepAndChecksItAgainstOptimizerAndScheduler) {
  TempDir dir;
  const std::string good = save_state(dir, "good.pt", 20, 20, 20);
  CommandResult r = run_ckptcheck("verify --json '" + good + "'");
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["step"], 20) << r.output;
  EXPECT_FALSE(r.output.find("step_disagreement") != std::string::npos) << r.output;
  const std::string torn = save_state(dir, "torn.pt", 20, 12, 20);
  r = run_ckptcheck("verify --json '" + torn + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  j = nlohmann::json::parse(r.output);
  bool found = false;
  for (const auto& e : j["errors"])
    found = found || (e["code"] == "step_disagreement" &&
                      e["message"].get<std::string>().find("last_epoch is 12") != std::string::npos);
  EXPECT_TRUE(found) << r.output;
  const std::string ahead = save_state(dir, "ahead.pt", 20, 20, 25);
  EXPECT_EQ(run_ckptcheck("verify '" + ahead + "'").exit_code, 1);
  // --weights-only judges no resume state, but still reports the step.
  r = run_ckptcheck("verify --json --weights-only '" + torn + "'");
  EXPECT_EQ(nlohmann::json::parse(r.output)["step"], 20) << r.output;
  // Megatron names its step `iteration`: verify reads it as diff and convert do (one step_of).
  const std::string megatron = dir / "megatron.pt";
  ASSERT_EQ(torch_save_with_python("{'iteration': 30, 'model': {'w': torch.zeros(2)}}", megatron).exit_code,
            0);
  r = run_ckptcheck("verify --json --weights-only '" + megatron + "'");
  EXPECT_EQ(nlohmann::json::parse(r.output)["step"], 30) << r.output;
}

// --quick reads a torch.save file's pickle whole, so it checks that member's CRC-32 too: a byte
// changed there renames what torch.load builds ('optimizer' -> 'Optimizer') and passed --quick.
TEST(ForensicsValues, QuickChecksTheMembersItReads) {
  TempDir dir;
  const std::string path = dir / "q.pt";
  ASSERT_EQ(torch_save_with_python("{'model': {'w': torch.ones(2)}, 'optimizer': {'state': {}, "
                                   "'param_groups': [{'lr': 0.1, 'params': []}]}, 'step': 5}",
                                   path)
                .exit_code,
            0);
  EXPECT_EQ(run_ckptcheck("verify --quick '" + path + "'").exit_code, 0);
  auto bytes = read_file_bytes(path);
  const std::string key = "optimizer";
  const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(at, bytes.end());
  *at = 'O';
  write_file_bytes(path, bytes);
  const CommandResult r = run_ckptcheck("verify --quick '" + path + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("zip member 'q/data.pkl'"), std::string::npos) << r.output;
}

// Every output mode answers: --json prints JSON also for a file that cannot be read at all.
TEST(ForensicsValues, JsonAlwaysAnswersInJson) {
  TempDir dir;
  const std::string good = save_state(dir, "good.pt", 20, 20, 20);
  auto bytes = read_file_bytes(good);
  bytes.resize(bytes.size() / 2);
  const std::string torn = dir / "torn.pt";
  write_file_bytes(torn, bytes);
  // diff and seal too (they printed nothing on stdout): diff's failing side is the one named.
  const std::vector<std::string> commands = {"inspect --json --errors", "inspect --json", "verify --json",
                                             "seal --json", "diff --json '" + good + "'"};
  for (const std::string& args : commands) {
    for (const std::string& path : {torn, dir / "missing.pt"}) {
      const bool missing = path == dir / "missing.pt";
      if (args.rfind("seal", 0) == 0 && !missing) continue;  // seal records any bytes; it judges none
      const CommandResult r = run_ckptcheck(args + " '" + path + "'");
      EXPECT_NE(r.exit_code, 0) << args << " " << path;
      // stdout holds the JSON; the one stderr line beside it (merged here) comes first.
      const size_t brace = r.output.find("\n{");
      const std::string json = r.output.rfind('{', 0) == 0 ? r.output : r.output.substr(brace + 1);
      const auto j = nlohmann::json::parse(json, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << args << " " << path << ": not JSON: " << r.output;
      EXPECT_FALSE(j["ok"].get<bool>()) << r.output;
      EXPECT_FALSE(j["errors"].empty()) << r.output;
      if (missing) EXPECT_EQ(j.value("exit_code", -1), r.exit_code) << r.output;
      if (args.rfind("diff", 0) == 0) EXPECT_EQ(j.value("path", ""), path) << r.output;
    }
  }
}

// A step directory whose name is another step's is refused; a root whose `latest` names an older
// checkpoint than another committed one says so.
TEST(ForensicsValues, StepDirectoriesAgreeWithTheirManifestAndLatestIsTheNewest) {
  TempDir dir;
  const std::string root = dir / "ckpt";
  const std::string four = save_training_state(root, full_training_state(4), 4);
  const std::string eight = root + "/step_00000008";
  std::filesystem::copy(four, eight, std::filesystem::copy_options::recursive);
  CommandResult r = run_ckptcheck("verify '" + eight + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("step_dir_mismatch"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("named for step 8 but its manifest is step 4"), std::string::npos) << r.output;
  std::filesystem::remove_all(eight);
  save_training_state(root, full_training_state(8), 8);
  write_file_bytes(root + "/latest", {'s', 't', 'e', 'p', '_', '0', '0', '0', '0', '0', '0', '0', '4', '\n'});
  r = run_ckptcheck("verify --json '" + root + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("newer_checkpoint_exists"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step_00000008 the newest"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
