// Megatron-Core `torch_dist` checkpoint directories (`iter_0000100/`), read without torch or Megatron:
//
//   DIR/.metadata, DIR/__<rank>_<i>.distcp   a PyTorch DCP checkpoint (formats/dcp_checkpoint.h) whose
//                                            top-level pickle class is Megatron's own
//                                            megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata
//                                            (a DCP Metadata subclass with one more field, `mcore_data`:
//                                            fqn -> {"nd_reformulated_orig_global_shape": ...}; older
//                                            Megatron set `mcore_data` on a plain Metadata)
//   DIR/metadata.json                        dataclasses.asdict(CheckpointingConfig):
//                                            {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
//                                             "common_backend": "torch", "common_backend_version": 1}
//   DIR/common.pt                            torch.save of the state every rank shares (args, iteration,
//                                            opt_param_scheduler, optimizer param_groups, ...), rank 0
//
// Megatron's ShardedObjects (rng_state, ...) are DCP bytes items holding torch.save([data, ...]) under
// their unique key ("rng_state/shard_0.1_1.2"); they read as any DCP bytes item.
// Megatron's loader builds CheckpointingConfig(**json), so an unknown key or a missing
// `sharded_backend` would make it refuse the directory: those are problems here too.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr const char* kMegatronConfigFileName = "metadata.json";
constexpr const char* kMegatronCommonFileName = "common.pt";
constexpr uint64_t kMegatronMaxConfigBytes = uint64_t{1} << 20;
constexpr const char* kMegatronMetadataClass =
    "megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata";

// What a torch_dist directory holds beyond DCP. `present` when metadata.json exists or `.metadata`'s
// class is MCoreMetadata; every problem is one line naming the file, expected and found.
struct MegatronParts {
  bool present = false;
  bool has_config = false;
  nlohmann::json config;                     // metadata.json as read (null when absent or unparsable)
  std::vector<std::string> config_problems;  // metadata.json absent, unparsable or not torch_dist v1
  bool has_common = false;                   // common.pt exists
  std::shared_ptr<const TensorFile> common;  // opened common.pt; null when absent or unreadable
  Status common_status;                      // why `common` is null although has_common
};

// Problems with a parsed metadata.json, each naming `where`.
std::vector<std::string> check_megatron_config(const nlohmann::json& config, const std::string& where);

// Reads DIR/metadata.json and opens DIR/common.pt (its storages are not read yet). Never fails:
// what is wrong is recorded. A file that is not a regular file inside DIR (a symlink leaving it) is
// refused like a missing one, with the reason.
MegatronParts read_megatron_parts(const std::string& dir, bool mcore_metadata);

}  // namespace ckpt
