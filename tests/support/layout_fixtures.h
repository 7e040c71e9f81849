// One clean fixture (or more) per registered checkpoint layout (layouts/layout_registry.h): the
// registry's conformance suite (tests/layouts/layout_registry_test.cpp: each is detected as its own
// layout only, with evidence) and the commands' (tests/cli/layout_registry_cli_test.cpp: verify
// passes each, and inspect and diff open each) read this one table. A layout added to the registry
// without a row here fails both.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"

namespace ckpt {
namespace testing {

struct LayoutFixture {
  std::string layout;       // the registered layout that must claim it, alone
  std::string kind;         // what verify reports
  std::string verify_args;  // what a clean copy needs to pass (--weights-only for weights files)
  bool found_from_above;    // a root or run folder: the checkpoint is a folder below the path
  bool needs_seal;          // only a seal makes it a checkpoint: seal it (or place a seal file) first
  // Writes the fixture under `scratch` (or names one in tests/data) and returns its path.
  std::function<std::string(const std::string& scratch)> make;
};

inline std::string layout_data(const std::string& relative) {
  return std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/" + relative;
}

inline std::vector<LayoutFixture> layout_fixtures() {
  namespace fs = std::filesystem;
  const auto data = [](const std::string& relative) {
    return [relative](const std::string&) { return layout_data(relative); };
  };
  return {
      {"native_checkpoint", "ckptcheck", "", false, false, data("native/manifest_v2")},
      {"native_checkpoint", "ckptcheck", "", true, false,
       [](const std::string& scratch) {
         save_training_state(scratch + "/root", full_training_state());
         return scratch + "/root";
       }},
      {"single_file", "torch_save", "", false, false, data("pytorch/adamw_state.pt")},
      {"single_file", "torch_save_legacy", "--weights-only", false, false,
       data("pytorch/legacy_model_state.pt")},
      {"single_file", "safetensors", "--weights-only", false, false,
       data("dcp/hf_sharded_safetensors/shard-00001-model-00001-of-00001.safetensors")},
      {"single_file", "hdf5", "--weights-only", false, false, data("gate/clean_weights.h5")},
      {"single_file", "keras", "--weights-only", false, false, data("trainers/keras/clean.keras")},
      // One shard named by every entry of weight_map: a real index puts each tensor in one shard.
      {"sharded_index", "safetensors_index", "--weights-only", false, false,
       [](const std::string& scratch) {
         const std::string dir = scratch + "/sharded";
         fs::create_directories(dir);
         const std::string a = "model-00001-of-00001.safetensors";
         fs::copy_file(layout_data("dcp/hf_sharded_safetensors/shard-00001-model-00001-of-00001.safetensors"),
                       dir + "/" + a);
         const std::string text =
             nlohmann::json{
                 {"metadata", {{"total_size", 0}}},
                 {"weight_map",
                  {{"optim.state.steps", a}, {"model.layers.0.weight", a}, {"model.embed.weight", a}}}}
                 .dump();
         write_file_bytes(dir + "/model.safetensors.index.json",
                          std::vector<uint8_t>(text.begin(), text.end()));
         return dir + "/model.safetensors.index.json";
       }},
      {"dcp", "dcp", "--weights-only", false, false, data("dcp/torch113")},
      {"megatron_torch_dist", "megatron_torch_dist", "", false, false, data("dcp/megatron_torch_dist")},
      {"hf_trainer", "hf_trainer", "", false, false, data("trainers/hf/checkpoint-10")},
      {"hf_trainer", "hf_trainer", "", true, false, data("trainers/hf/run")},
      {"hf_trainer", "hf_trainer", "", false, false, data("trainers/hf/checkpoint-10-deepspeed")},
      {"hf_trainer", "hf_trainer", "", false, false, data("trainers/hf/checkpoint-10-fsdp")},
      {"accelerate", "accelerate", "", false, false, data("trainers/accelerate/save_state")},
      {"accelerate", "accelerate", "", false, false, data("trainers/accelerate/save_state_deepspeed")},
      {"deepspeed", "deepspeed", "", true, false, data("trainers/deepspeed/zero2")},
      {"deepspeed", "deepspeed", "", false, false, data("trainers/deepspeed/zero2/global_step10")},
      {"model_folder", "model_folder", "--weights-only", false, false,
       [](const std::string& scratch) {
         const std::string dir = scratch + "/checkpoint-7";
         fs::create_directories(dir);
         fs::copy_file(layout_data("pytorch/model_state.pt"), dir + "/pytorch_model.bin");
         fs::copy_file(layout_data("pytorch/adamw_state.pt"), dir + "/optimizer.pt");
         return dir;
       }},
      {"sealed_directory", "sealed_directory", "", false, true,
       [](const std::string& scratch) {
         const std::string dir = scratch + "/exported";
         fs::create_directories(dir);
         fs::copy_file(layout_data("pytorch/adamw_state.pt"), dir + "/adamw.pt");
         return dir;
       }},
  };
}

}  // namespace testing
}  // namespace ckpt
