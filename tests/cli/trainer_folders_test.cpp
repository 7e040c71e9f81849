// The folders the big trainers write, verified as one checkpoint each with their trainer's resume
// contract (issue 64; layouts/trainer_layout.h, verifier/check/trainer_verifier.h), on fixtures in
// each trainer's real layout (scripts/make_trainer_fixtures.py: real key names and pickle shapes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

const std::string kTrainers = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/trainers/";

nlohmann::json verify_json(const std::string& args, int expected_exit) {
  const CommandResult r = run_ckptcheck("verify --json " + args);
  EXPECT_EQ(r.exit_code, expected_exit) << args << ": " << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

bool has_code(const nlohmann::json& j, const char* list, const std::string& code) {
  for (const auto& e : j.value(list, nlohmann::json::array())) {
    if (e.value("code", "") == code) return true;
  }
  return false;
}

// verify --json ARGS exits `expected_exit` with a finding `code` in `list` ("errors" or "warnings"),
// its report naming `words` where given; returns the report for further checks.
nlohmann::json verify_finding(const std::string& args, int expected_exit, const char* list,
                              const std::string& code, const std::string& words = "") {
  const nlohmann::json j = verify_json(args, expected_exit);
  EXPECT_TRUE(has_code(j, list, code)) << args << ": " << j.dump();
  if (!words.empty()) EXPECT_NE(j.dump().find(words), std::string::npos) << args << ": " << j.dump();
  return j;
}

void write_text(const std::string& path, const std::string& text) {
  write_file_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string copy_of(const std::string& fixture, const TempDir& dir) {
  const std::string to = dir / std::filesystem::path(fixture).filename().string();
  std::filesystem::copy(kTrainers + fixture, to, std::filesystem::copy_options::recursive);
  return to;
}

TEST(TrainerFolders, EveryRealLayoutPassesAsOneCheckpointOfItsKind) {
  const std::pair<const char*, const char*> kFolders[] = {
      {"hf/checkpoint-10", "hf_trainer"},      {"hf/checkpoint-10-bin", "hf_trainer"},
      {"hf/checkpoint-10-peft", "hf_trainer"}, {"hf/run", "hf_trainer"},
      {"accelerate/save_state", "accelerate"}, {"accelerate/save_state_bin", "accelerate"},
      {"deepspeed/zero2", "deepspeed"},        {"deepspeed/zero2_bf16", "deepspeed"},
      {"deepspeed/zero3", "deepspeed"},        {"deepspeed/zero2/global_step10", "deepspeed"}};
  for (const auto& [folder, kind] : kFolders) {
    for (const char* mode : {"", "--weights-only "}) {
      const auto j = verify_json(std::string(mode) + "'" + kTrainers + folder + "'", 0);
      EXPECT_EQ(j.value("kind", ""), kind) << folder;
      EXPECT_GT(j.value("tensors", 0), 0) << folder;
    }
  }
  // The run directory resolves to the checkpoint the Trainer's resume would take: the highest N.
  const auto run = verify_json("'" + kTrainers + "hf/run'", 0);
  EXPECT_NE(run.value("path", "").find("checkpoint-10"), std::string::npos) << run.dump();
  EXPECT_EQ(run.value("step", -1), 10) << "step read from trainer_state.json";
}

// The Trainer and save_state under an engine (transformers' and accelerate's own layouts): DeepSpeed
// leaves `latest` and its tag folder inside their folder, FSDP's SHARDED_STATE_DICT its DCP folders.
// Each is one checkpoint of the trainer's kind, its engine's files judged by the engine's loader
// (DeepSpeed's profile, DCP's reader), never refused as two trainers or missing an optimizer.pt.
TEST(TrainerFolders, TheTrainerAndSaveStateUnderDeepSpeedOrFsdpAreOneCheckpoint) {
  const std::pair<const char*, const char*> kFolders[] = {{"hf/checkpoint-10-deepspeed", "hf_trainer"},
                                                          {"hf/checkpoint-10-fsdp", "hf_trainer"},
                                                          {"accelerate/save_state_deepspeed", "accelerate"}};
  for (const auto& [folder, kind] : kFolders) {
    for (const char* mode : {"", "--weights-only "}) {
      const auto j = verify_json(std::string(mode) + "'" + kTrainers + folder + "'", 0);
      EXPECT_EQ(j.value("kind", ""), kind) << folder;
      EXPECT_EQ(j.value("step", -1), 10) << folder;
      EXPECT_FALSE(has_code(j, "errors", "pickle_global_refused")) << j.dump();
    }
  }
  const nlohmann::json expected = nlohmann::json::parse(read_text_file(kTrainers + "expected.json"));
  // DeepSpeed's tag under the Trainer: ZeRO reassembled, value for value the reference of the same
  // training (deepspeed/zero2, zero_to_fp32's algorithm in Python).
  const CommandResult ds = run_ckptcheck("inspect --json '" + kTrainers + "hf/checkpoint-10-deepspeed'");
  ASSERT_EQ(ds.exit_code, 0) << ds.output;
  std::map<std::string, std::string> ours;
  const nlohmann::json ds_listed = nlohmann::json::parse(ds.output);  // held: the loop reads into it
  for (const auto& t : ds_listed["tensors"]) ours[t.value("name", "")] = t.value("sha256", "");
  const auto& reference = expected["deepspeed/zero2"]["reference_fp32"];
  ASSERT_FALSE(reference.empty());
  size_t reassembled = 0;
  for (const auto& [name, t] : reference.items()) {
    if (!ours.count("zero_fp32/" + name)) {  // a buffer: whole in the model states, which zero_to_fp32 adds
      EXPECT_TRUE(ours.count("global_step10/mp_rank_00_model_states.pt/module." + name)) << name;
      continue;
    }
    EXPECT_EQ(ours["zero_fp32/" + name], t["sha256"].get<std::string>()) << name;
    ++reassembled;
  }
  EXPECT_GE(reassembled, 8u);
  // FSDP's sharded model: each parameter as the DCP folder holds it, equal to the same step's weights
  // that torch wrote to model.safetensors in hf/checkpoint-10.
  const CommandResult fsdp = run_ckptcheck("inspect --json '" + kTrainers + "hf/checkpoint-10-fsdp'");
  ASSERT_EQ(fsdp.exit_code, 0) << fsdp.output;
  ours.clear();
  const nlohmann::json fsdp_listed = nlohmann::json::parse(fsdp.output);  // held: the loop reads into it
  for (const auto& t : fsdp_listed["tensors"]) ours[t.value("name", "")] = t.value("sha256", "");
  size_t compared = 0;
  for (const auto& t : expected["hf/checkpoint-10"]["files"]["model.safetensors"]["tensors"]) {
    EXPECT_EQ(ours["pytorch_model_fsdp_0/model." + t["name"].get<std::string>()],
              t["sha256"].get<std::string>())
        << t.dump();
    ++compared;
  }
  EXPECT_GE(compared, 8u);
  EXPECT_EQ(ours.count("optimizer_0/optimizer.state.embed.weight.exp_avg"), 1u) << fsdp.output;
}

// What the engine's resume reads is checked in the trainer's folder: every ZeRO rank, the step in the
// tag folder's name, FSDP's optimizer folder, and a damaged DCP item named under its folder.
TEST(TrainerFolders, AnEnginesPartsAreCheckedInsideTheTrainersFolder) {
  TempDir dir;
  const std::string ds = copy_of("hf/checkpoint-10-deepspeed", dir);
  std::filesystem::rename(ds + "/global_step10", ds + "/global_step8");
  write_text(ds + "/latest", "global_step8");
  auto j = verify_finding("'" + ds + "'", 1, "errors", "step_disagreement", "the tag folder global_step8 8");
  std::filesystem::remove(ds + "/global_step8/zero_pp_rank_1_mp_rank_00_optim_states.pt");
  j = verify_finding("'" + ds + "'", 1, "errors", "optimizer_state_missing", "zero_pp_rank_1");

  const std::string fsdp = copy_of("hf/checkpoint-10-fsdp", dir);
  std::filesystem::remove_all(fsdp + "/optimizer_0");
  j = verify_finding("'" + fsdp + "'", 1, "errors", "optimizer_state_missing");
  verify_json("--weights-only '" + fsdp + "'", 0);
  const std::string item = fsdp + "/pytorch_model_fsdp_0/__0_1.distcp";
  std::filesystem::resize_file(item, std::filesystem::file_size(item) / 2);
  j = verify_json("--weights-only '" + fsdp + "'", 1);
  bool named = false;
  for (const auto& e : j["errors"])
    named = named || e.value("shard", "").rfind("pytorch_model_fsdp_0/", 0) == 0;
  EXPECT_TRUE(named) << j.dump();
}

// What a white-box review found passing that the trainer could not resume from: trainer_state.json
// without an integer global_step (TrainerState would resume at step 0), a config.json that is no
// JSON, a ZeRO-3 rank's optimizer states in a ZeRO-2 save, one process's RNG file missing, FSDP's
// sharded optimizer under another index than the 0 the Trainer reads. And the resume state and
// Accelerate's step are reported, not left empty.
TEST(TrainerFolders, WhatTheTrainerCouldNotResumeFromFails) {
  TempDir dir;
  const std::string hf = copy_of("hf/checkpoint-10", dir);
  const std::string state = hf + "/trainer_state.json";
  const std::string text = read_text_file(state);
  for (const std::string& value : {"\"10\"", "null", "10.5"}) {
    write_text(state, replaced_once(text, "\n  \"global_step\": 10", "\n  \"global_step\": " + value));
    const auto j = verify_json("'" + hf + "'", 1);
    EXPECT_TRUE(has_code(j, "errors", "step_state_missing")) << value << ": " << j.dump();
  }
  write_text(state, replaced_once(text, "\n  \"global_step\": 10,", ""));
  EXPECT_TRUE(has_code(verify_json("'" + hf + "'", 1), "errors", "step_state_missing"));
  write_text(state, text);
  write_text(hf + "/config.json", "");
  EXPECT_TRUE(has_code(verify_json("'" + hf + "'", 1), "errors", "shard_unreadable"));
  // A hostile nesting is refused before it is parsed (it crashed diff, and verify passed it).
  write_text(hf + "/config.json", "{\"a\": " + std::string(300000, '[') + std::string(300000, ']') + "}");
  EXPECT_TRUE(has_code(verify_json("'" + hf + "'", 1), "errors", "shard_unreadable"));
  EXPECT_EQ(run_ckptcheck("diff '" + hf + "' '" + hf + "'").exit_code, 0);

  const std::string mixed = copy_of("deepspeed/zero2", dir);
  std::filesystem::copy_file(
      kTrainers + "deepspeed/zero3/global_step10/zero_pp_rank_1_mp_rank_00_optim_states.pt",
      mixed + "/global_step10/zero_pp_rank_1_mp_rank_00_optim_states.pt",
      std::filesystem::copy_options::overwrite_existing);
  auto j = verify_finding("'" + mixed + "'", 1, "errors", "zero_partition_mismatch", "different ZeRO stages");

  const std::string ds = copy_of("hf/checkpoint-10-deepspeed", dir);
  std::filesystem::remove(ds + "/rng_state_1.pth");
  j = verify_finding("'" + ds + "'", 0, "warnings", "rng_state_missing",
                     "no rng_state_1.pth of the 2 processes");

  // A file that is a link out of the folder: seal refuses it, and so does verify now.
  TempDir link_dir;
  const std::string linked = copy_of("hf/checkpoint-10", link_dir);
  std::filesystem::rename(linked + "/optimizer.pt", link_dir / "elsewhere.pt");
  std::filesystem::create_symlink(link_dir / "elsewhere.pt", linked + "/optimizer.pt");
  j = verify_finding("'" + linked + "'", 1, "errors", "shard_path_unsafe");

  const std::string fsdp = copy_of("hf/checkpoint-10-fsdp", dir);
  std::filesystem::rename(fsdp + "/optimizer_0", fsdp + "/optimizer_1");
  j = verify_json("'" + fsdp + "'", 1);
  EXPECT_NE(j.dump().find("no optimizer_0/ (found optimizer_1/)"), std::string::npos) << j.dump();

  j = verify_json("'" + kTrainers + "accelerate/save_state'", 0);
  EXPECT_EQ(j.value("step", -1), 10) << "random_states_0.pkl's step";
  // No step recorded: null ("not measured"), never -1 or 0.
  const auto weights = verify_json("--weights-only '" + kTrainers + "hf/checkpoint-10/model.safetensors'", 0);
  EXPECT_TRUE(weights["step"].is_null()) << weights.dump();
  std::set<std::string> parts;
  for (const auto& r : j["resume_state"]) parts.insert(r.value("part", ""));
  EXPECT_EQ(parts, (std::set<std::string>{"optimizer", "scheduler", "scaler", "rng"})) << j.dump();
}

// Damage is named where the resume would meet it: the run folder's newest checkpoint-N (which
// get_last_checkpoint takes, whatever it holds), a truncated model.safetensors (once taken for a DCP
// folder beside the Trainer's, "claimed by two layouts"), and DeepSpeed's `latest` or tag.
TEST(TrainerFolders, DamageIsNamedWhereTheResumeWouldMeetIt) {
  TempDir dir;
  const std::string run = copy_of("hf/run", dir);
  std::filesystem::create_directories(run + "/checkpoint-20");
  auto j = verify_json("'" + run + "'", 1);
  EXPECT_NE(j.dump().find("checkpoint-20: the highest checkpoint-N folder"), std::string::npos) << j.dump();
  EXPECT_NE(j.dump().find("pass " + run + "/checkpoint-10"), std::string::npos) << j.dump();

  const std::string hf = copy_of("hf/checkpoint-10", dir);
  std::filesystem::resize_file(hf + "/model.safetensors", 700);
  j = verify_json("'" + hf + "'", 1);
  EXPECT_EQ(j.value("kind", ""), "hf_trainer") << j.dump();
  EXPECT_TRUE(has_code(j, "errors", "shard_truncated")) << j.dump();
  EXPECT_FALSE(has_code(j, "errors", "reading_ambiguous")) << j.dump();

  const std::string ds = copy_of("deepspeed/zero2", dir);
  std::filesystem::remove(ds + "/global_step10/mp_rank_00_model_states.pt");
  j = verify_json("'" + ds + "'", 1);
  EXPECT_NE(j.dump().find("no mp_rank_*_model_states.pt"), std::string::npos) << j.dump();
  const std::string empty_latest = copy_of("deepspeed/zero2_bf16", dir);
  write_text(empty_latest + "/latest", "");
  j = verify_json("'" + empty_latest + "'", 1);
  EXPECT_NE(j.dump().find("latest names no tag folder"), std::string::npos) << j.dump();
  write_text(empty_latest + "/latest", "  global_step10\n");  // DeepSpeed strips both ends
  verify_json("'" + empty_latest + "'", 0);
  const std::string hfds = copy_of("hf/checkpoint-10-deepspeed", dir);
  write_text(hfds + "/latest", "global_step5");
  j = verify_json("'" + hfds + "'", 1);
  EXPECT_NE(j.dump().find("latest names 'global_step5', no folder here"), std::string::npos) << j.dump();
  EXPECT_FALSE(has_code(j, "errors", "pickle_global_refused")) << j.dump();
}

// training_args.bin is never loaded on resume: a warning naming its globals, not a failed folder;
// verified alone it still fails. numpy's RNG state is accepted in the RNG file, and only there.
TEST(TrainerFolders, FilesAreJudgedByWhatTheTrainerLoads) {
  const auto folder = verify_json("'" + kTrainers + "hf/checkpoint-10'", 0);
  EXPECT_TRUE(has_code(folder, "warnings", "file_not_loaded_on_resume")) << folder.dump();
  verify_json("--weights-only '" + kTrainers + "hf/checkpoint-10/training_args.bin'", 1);
  const auto rng = verify_json("--weights-only '" + kTrainers + "hf/checkpoint-10/rng_state.pth'", 1);
  EXPECT_TRUE(has_code(rng, "errors", "pickle_global_refused"))
      << "numpy outside an RNG file: " << rng.dump();
  verify_json("'" + kTrainers + "accelerate/save_state'", 0);
}

TEST(TrainerFolders, NumpyInAnotherShapeOrCodeInAnRngFileIsRefused) {
  TempDir dir;
  const std::string folder = copy_of("hf/checkpoint-10", dir);
  // numpy's scalar() is no part of an RNG state: refused even in the RNG file.
  const CommandResult made =
      torch_save_with_python("{'cpu': torch.get_rng_state(), 'numpy': numpy.float64(1.5)}",
                             folder + "/rng_state.pth", "torch, numpy");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto j = verify_finding("'" + folder + "'", 1, "errors", "pickle_global_refused");
  std::filesystem::copy_file(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/malicious_os_system.pt",
                             folder + "/rng_state.pth", std::filesystem::copy_options::overwrite_existing);
  j = verify_json("--weights-only '" + folder + "'", 1);
  EXPECT_NE(j.dump().find("posix.system"), std::string::npos) << j.dump();
}

TEST(TrainerFolders, ResumeRulesInTheTrainersWords) {
  auto j = verify_finding("'" + kTrainers + "hf/checkpoint-10-save-only-model'", 1, "errors",
                          "optimizer_state_missing", "save_only_model=True");
  verify_json("--weights-only '" + kTrainers + "hf/checkpoint-10-save-only-model'", 0);
  TempDir dir;
  const std::string hf = copy_of("hf/checkpoint-10", dir);
  std::filesystem::remove(hf + "/scheduler.pt");
  j = verify_json("'" + hf + "'", 1);
  EXPECT_NE(j.dump().find("only together"), std::string::npos) << j.dump();
  const std::string ds = copy_of("deepspeed/zero2", dir);
  std::filesystem::remove(ds + "/global_step10/zero_pp_rank_1_mp_rank_00_optim_states.pt");
  j = verify_json("'" + ds + "'", 1);
  EXPECT_NE(j.dump().find("zero_pp_rank_1"), std::string::npos) << j.dump();
}

TEST(TrainerFolders, TheStepMustAgreeAcrossTheFiles) {
  TempDir dir;
  const std::string hf = copy_of("hf/checkpoint-10", dir);
  const std::string state = hf + "/trainer_state.json";
  write_text(state,
             replaced_once(read_text_file(state), "\n  \"global_step\": 10", "\n  \"global_step\": 7"));
  const auto j = verify_finding("'" + hf + "'", 1, "errors", "step_disagreement", "global_step 7");
  EXPECT_NE(j.dump().find("last_epoch 10"), std::string::npos) << j.dump();
}

TEST(TrainerFolders, TwoTrainersOrAMissingTagAreRefused) {
  TempDir dir;
  const std::string hf = copy_of("hf/checkpoint-10", dir);
  std::filesystem::copy_file(kTrainers + "accelerate/save_state/random_states_0.pkl",
                             hf + "/random_states_0.pkl");
  CommandResult r = run_ckptcheck("verify '" + hf + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("hf_trainer (trainer_state.json) and accelerate (random_states_0.pkl)"),
            std::string::npos)
      << r.output;
  const std::string ds = copy_of("deepspeed/zero2", dir);
  write_text(ds + "/latest", "global_step99");
  r = run_ckptcheck("verify '" + ds + "'");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("global_step99"), std::string::npos) << r.output;
}

// inspect and diff open a trainer's folder as one checkpoint too: its files' tensors under their
// file's name, its values per file, the step its trainer saved.
TEST(TrainerFolders, InspectAndDiffOpenTheFolderAsOneCheckpoint) {
  const CommandResult listed = run_ckptcheck("inspect --json '" + kTrainers + "hf/checkpoint-10'");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const auto j = nlohmann::json::parse(listed.output);
  EXPECT_EQ(j["kind"], "hf_trainer");
  EXPECT_EQ(j["metadata"]["step"], 10);
  bool weights = false, moments = false;
  for (const auto& t : j["tensors"]) {
    weights = weights || t["name"] == "embed.weight";
    moments = moments || t["name"] == "optimizer.pt/state.0.exp_avg";
  }
  EXPECT_TRUE(weights && moments) << listed.output;
  const CommandResult same =
      run_ckptcheck("diff '" + kTrainers + "hf/checkpoint-10' '" + kTrainers + "hf/checkpoint-10'");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  const CommandResult older =
      run_ckptcheck("diff '" + kTrainers + "hf/run/checkpoint-10' '" + kTrainers + "hf/run/checkpoint-5'");
  EXPECT_EQ(older.exit_code, 1) << older.output;
  EXPECT_NE(older.output.find("step 10 vs 5 (b is an older checkpoint"), std::string::npos) << older.output;
  const CommandResult ds = run_ckptcheck("inspect '" + kTrainers + "deepspeed/zero2'");
  EXPECT_EQ(ds.exit_code, 0) << ds.output;
  EXPECT_NE(ds.output.find("(deepspeed, "), std::string::npos) << ds.output;
}

// DeepSpeed without DeepSpeed: every parameter as a full fp32 tensor reassembled from the ranks'
// partitions (stages 2 and 3, fp32 and bf16 training), value for value the reference reconstruction
// scripts/make_trainer_fixtures.py computed independently (zero_to_fp32's algorithm, in Python).
TEST(TrainerFolders, ZeroPartitionsReassembleIntoTheParameters) {
  const nlohmann::json expected = nlohmann::json::parse(read_text_file(kTrainers + "expected.json"));
  for (const char* stage : {"deepspeed/zero2", "deepspeed/zero2_bf16", "deepspeed/zero3"}) {
    const CommandResult r = run_ckptcheck("inspect --json '" + kTrainers + stage + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    std::map<std::string, std::string> ours;
    std::set<std::string> buffers;  // whole in the model states' module, not in the partitions
    for (const auto& t : j["tensors"]) {
      const std::string name = t["name"];
      if (name.rfind("zero_fp32/", 0) == 0)
        ours[name.substr(10)] = t["shape"].dump() + " " + t["sha256"].get<std::string>();
      const size_t module = name.find("_model_states.pt/module.");
      if (module != std::string::npos) buffers.insert(name.substr(module + 24));
    }
    const auto& reference = expected[stage]["reference_fp32"];
    ASSERT_FALSE(reference.empty()) << stage;
    size_t parameters = 0;
    for (const auto& [name, want] : reference.items()) {
      if (!ours.count(name)) {  // zero_to_fp32 adds the buffers (as fp32): they are not reassembled
        EXPECT_TRUE(buffers.count(name)) << stage << ": " << name << " is neither reassembled nor a buffer";
        continue;
      }
      ++parameters;
      EXPECT_EQ(ours[name], want["shape"].dump() + " " + want["sha256"].get<std::string>())
          << stage << " " << name;
    }
    EXPECT_EQ(parameters, ours.size()) << stage;
    EXPECT_GE(parameters, 8u) << stage;
  }
}

// A pickled nn.Module whose blocks share one submodule: inspect lists every reachable name (never
// fewer than the same model's state_dict), the repeats as aliases (issue 64).
TEST(TrainerFolders, InspectListsEveryNameOfASharedSubmodule) {
  TempDir dir;
  const std::string file = dir / "shared.pt";
  const CommandResult made = run_command(
      "/usr/bin/python3 -c \"import torch; torch.manual_seed(0); shared = torch.nn.Linear(4, 4); "
      "m = torch.nn.Sequential(*[torch.nn.Sequential(shared, torch.nn.ReLU()) for _ in range(6)]); "
      "torch.save(m, '" +
      file + "'); print(len(m.state_dict()))\"");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const size_t state_dict_names =
      std::stoul(made.output.substr(made.output.find_last_of('\n', made.output.size() - 2) + 1));
  const CommandResult r = run_ckptcheck("inspect --json '" + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  size_t aliases = 0;
  for (const auto& t : j["tensors"]) aliases += t.contains("alias_of") ? 1 : 0;
  EXPECT_GE(j["tensors"].size(), state_dict_names) << r.output;
  EXPECT_EQ(aliases, j["tensors"].size() - 2) << "one weight and one bias object, every other name an alias";
}

// The ranks' flat fp32 partitions must hold every parameter once (what zero_to_fp32 reassembles): a
// rank's file from another save (here rank 0's in rank 1's place) is named.
TEST(TrainerFolders, ZeroPartitionsCoverEveryParameterOnce) {
  TempDir dir;
  for (const char* stage : {"deepspeed/zero2", "deepspeed/zero3"}) {
    const std::string ds = copy_of(stage, dir);
    std::filesystem::copy_file(ds + "/global_step10/zero_pp_rank_0_mp_rank_00_optim_states.pt",
                               ds + "/global_step10/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                               std::filesystem::copy_options::overwrite_existing);
    const auto j = verify_json("'" + ds + "'", std::string(stage) == "deepspeed/zero2" ? 1 : 0);
    if (std::string(stage) == "deepspeed/zero2") {
      EXPECT_TRUE(has_code(j, "errors", "zero_partition_mismatch")) << j.dump();
      EXPECT_NE(j.dump().find("hold 16 elements, the model's param_shapes need 13"), std::string::npos)
          << j.dump();
    } else {
      // ZeRO-3 gives every rank an equal share: a swapped copy has the right size (its values are another
      // rank's; only a seal or the reassembled weights against a reference can tell).
      EXPECT_FALSE(has_code(j, "errors", "zero_partition_mismatch")) << j.dump();
    }
    std::filesystem::remove_all(ds);
  }
}

// A ZeRO-3 model-states file holds empty placeholders: alone, it is no file of weights.
TEST(TrainerFolders, ALoneZero3ModelStatesFileIsNoWeightsFile) {
  const auto j = verify_json("--weights-only '" + kTrainers +
                                 "deepspeed/zero3/global_step10/zero_pp_rank_0_mp_rank_00_model_states.pt'",
                             1);
  EXPECT_TRUE(has_code(j, "errors", "zero_placeholders_only")) << j.dump();
  EXPECT_NE(j.dump().find("optim_states"), std::string::npos) << j.dump();
}

// Keras 3's .keras archive: read (its weights listed and hashed), its config gated by Keras's own
// rules, and two members of one name refused (the one Keras reads is the last).
TEST(TrainerFolders, KerasArchivesAreReadAndTheirCodeRefused) {
  auto j = verify_json("--weights-only '" + kTrainers + "keras/clean.keras'", 0);
  EXPECT_EQ(j.value("kind", ""), "keras");
  EXPECT_EQ(j.value("tensors", 0), 4);
  for (const char* mode : {"", "--weights-only "}) {
    j = verify_finding(std::string(mode) + "'" + kTrainers + "keras/lambda.keras'", 1, "errors",
                       "keras_code_refused", "Lambda");
    j = verify_finding(std::string(mode) + "'" + kTrainers + "keras/duplicate_config.keras'", 1, "errors",
                       "reading_ambiguous");
  }
  const CommandResult listed = run_ckptcheck("inspect --json '" + kTrainers + "keras/clean.keras'");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("layers/dense/vars/0"), std::string::npos) << listed.output;
}

// A file the trainer loads that names several code-running globals: one text line for the file (its
// role, the globals listed, what to do), while --json keeps one finding per global.
TEST(TrainerFolders, AFilesRefusedGlobalsAreOneLineNamingItsRole) {
  TempDir dir;
  const std::string folder = copy_of("hf/checkpoint-10", dir);
  std::filesystem::copy_file(folder + "/training_args.bin", folder + "/rng_state.pth",
                             std::filesystem::copy_options::overwrite_existing);
  const CommandResult r = run_ckptcheck("verify --weights-only '" + folder + "'");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  size_t lines = 0;
  std::string line;
  for (size_t at = r.output.find("[pickle_global_refused]"); at != std::string::npos;
       at = r.output.find("[pickle_global_refused]", at + 1)) {
    ++lines;
    line = r.output.substr(at, r.output.find('\n', at) - at);
  }
  EXPECT_EQ(lines, 1u) << r.output;
  EXPECT_NE(line.find("rng_state.pth: rng file, which hf_trainer loads on resume"), std::string::npos)
      << line;
  EXPECT_NE(line.find("names 10 globals"), std::string::npos) << line;
  EXPECT_NE(line.find("dangerous: '__builtin__.getattr'"), std::string::npos) << line;
  EXPECT_NE(line.find("'accelerate.state.PartialState'"), std::string::npos) << line;
  EXPECT_NE(line.find("--allow-global"), std::string::npos) << "says what to do: " << line;
  const auto j = verify_json("--weights-only '" + folder + "'", 1);
  size_t findings = 0;
  for (const auto& e : j["errors"]) findings += e.value("code", "") == "pickle_global_refused" ? 1 : 0;
  EXPECT_EQ(findings, 10u) << j.dump();
}

// What a profile accepts is grouped the same way: one line per file (ZeRO-3 on 2 ranks: each rank's
// optimizer states name three DeepSpeed globals; an HF RNG file names numpy's three), every global
// on it with its use. JSON keeps one record per global.
TEST(TrainerFolders, AFilesAcceptedGlobalsAreOneLine) {
  for (const auto& [folder, lines_expected, profile] :
       {std::tuple<const char*, size_t, const char*>{"deepspeed/zero3", 2, "(DeepSpeed states)"},
        {"hf/checkpoint-10", 1, "(trainer RNG state (numpy))"}}) {
    const CommandResult r = run_ckptcheck("verify '" + kTrainers + folder + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    size_t lines = 0;
    for (size_t at = r.output.find("\naccepted: "); at != std::string::npos;
         at = r.output.find("\naccepted: ", at + 1)) {
      ++lines;
      const std::string line = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
      EXPECT_NE(line.find("accepted: 3 pickle globals " + std::string(profile) + " in "), std::string::npos)
          << line;
    }
    EXPECT_EQ(lines, lines_expected) << r.output;
    const auto j = verify_json("'" + kTrainers + folder + "'", 0);
    EXPECT_EQ(j["accepted_globals"].size(), 3 * lines_expected) << j.dump();
  }
}

// The sha256 of every tensor `inspect --json` lists, by name.
std::map<std::string, std::string> inspected_hashes(const std::string& path) {
  const CommandResult r = run_ckptcheck("inspect --json '" + path + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> out;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  for (const auto& t : j.value("tensors", nlohmann::json::array()))
    out[t.value("name", "")] = t.value("sha256", "");
  return out;
}

// Keras 3's model.weights.npz (NpzIOStore) and archives recompressed by a zip tool: read with the
// same tensors as the .h5 archive, hashes equal to numpy's own reading (expected.json), and an
// object array (a pickle: what Keras's writer makes of each layer's dict) refused naming its member.
TEST(TrainerFolders, KerasNpzAndDeflatedArchivesAreReadAsKerasReadsThem) {
  std::ifstream in(kTrainers + "expected.json");
  const auto expected = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(expected.is_discarded());
  std::map<std::string, std::string> numpy_hashes;
  for (const auto& [name, a] : expected["keras/clean_npz.keras"]["npz"].items())
    numpy_hashes[name] = a.value("sha256", "");
  ASSERT_EQ(numpy_hashes.size(), 4u);
  const auto h5_hashes = inspected_hashes(kTrainers + "keras/clean.keras");
  EXPECT_EQ(h5_hashes, numpy_hashes) << "the .h5 and the .npz hold the same four variables";
  for (const char* archive : {"clean_npz.keras", "clean_npz_deflated.keras", "clean_deflated.keras"}) {
    for (const char* mode : {"", "--weights-only "}) {
      const auto j = verify_json(std::string(mode) + "'" + kTrainers + "keras/" + archive + "'", 0);
      EXPECT_EQ(j.value("kind", ""), "keras") << archive;
      EXPECT_EQ(j.value("tensors", 0), 4) << archive;
    }
    EXPECT_EQ(inspected_hashes(kTrainers + "keras/" + archive), numpy_hashes) << archive;
  }
  for (const char* mode : {"", "--weights-only "}) {
    const auto j = verify_finding(std::string(mode) + "'" + kTrainers + "keras/pickled_npz.keras'", 1,
                                  "errors", "keras_code_refused");
    EXPECT_EQ(j.value("tensors", -1), 0) << "a pickled member is no weights";
    EXPECT_NE(j.dump().find("member 'model.weights.npz/layers/dense.npy'"), std::string::npos) << j.dump();
    EXPECT_NE(j.dump().find("allow_pickle=True"), std::string::npos) << j.dump();
  }
}

// A deflated member is inflated bounded by the directory's sizes: a damaged stream is refused naming
// the member, never read past.
TEST(TrainerFolders, ADamagedDeflatedKerasMemberIsRefusedNamingIt) {
  TempDir dir;
  for (const char* archive : {"clean_deflated.keras", "clean_npz_deflated.keras"}) {
    const std::string path = copy_of("keras/" + std::string(archive), dir);
    std::vector<uint8_t> bytes = read_file_bytes(path);
    // The config.json member: its local header's name, then the deflated bytes after it.
    const std::string name = "config.json";
    const auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
    ASSERT_NE(at, bytes.end()) << archive;
    const size_t data = static_cast<size_t>(at - bytes.begin()) + name.size() + 40;
    for (size_t k = 0; k < 16; ++k) bytes[data + k] ^= 0x5a;
    write_file_bytes(path, bytes);
    const auto j = verify_json("--weights-only '" + path + "'", 1);
    EXPECT_NE(j.dump().find("config.json"), std::string::npos) << archive << ": " << j.dump();
    EXPECT_TRUE(has_code(j, "errors", "shard_unreadable") || has_code(j, "errors", "shard_corrupt") ||
                has_code(j, "errors", "zip_crc_mismatch"))
        << j.dump();
  }
}

}  // namespace
}  // namespace ckpt
