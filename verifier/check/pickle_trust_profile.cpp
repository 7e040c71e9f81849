#include "verifier/check/pickle_trust_profile.h"

#include "base/text.h"

namespace ckpt {

namespace {

struct ProfileClass {
  const char* name;
  PickleDataShape shape;
};

// Where DCP's dataclasses and enums live: torch 2.x's torch.distributed.checkpoint, and torch
// 1.13's torch.distributed._shard spellings (TensorProperties and its MEM_FORMAT_ENCODING enum lived
// in sharded_tensor.metadata then).
constexpr const char* kDcpModules[] = {"torch.distributed.checkpoint.metadata.",
                                       "torch.distributed.checkpoint.planner.",
                                       "torch.distributed.checkpoint.filesystem.",
                                       "torch.distributed._shard.checkpoint.metadata.",
                                       "torch.distributed._shard.checkpoint.planner.",
                                       "torch.distributed._shard.checkpoint.filesystem.",
                                       "torch.distributed._shard.sharded_tensor.metadata.",
                                       "torch.distributed._shard.metadata."};

// Every dataclass and enum those modules define, torch 1.13 to 2.x. Each is rebuilt from plain
// fields; none acts on the world (TensorProperties' __setstate__ only assigns its five fields).
constexpr ProfileClass kDcpClasses[] = {
    {"Metadata", PickleDataShape::kRecord},
    {"TensorStorageMetadata", PickleDataShape::kRecord},
    {"BytesStorageMetadata", PickleDataShape::kRecord},
    {"ChunkStorageMetadata", PickleDataShape::kRecord},
    {"MetadataIndex", PickleDataShape::kRecord},
    {"TensorProperties", PickleDataShape::kRecord},
    {"StorageMeta", PickleDataShape::kRecord},
    {"ShardMetadata", PickleDataShape::kRecord},
    {"TensorWriteData", PickleDataShape::kRecord},
    {"BytesIOWriteData", PickleDataShape::kRecord},
    {"BytesWriteData", PickleDataShape::kRecord},
    {"WriteItem", PickleDataShape::kRecord},
    {"ReadItem", PickleDataShape::kRecord},
    {"SavePlan", PickleDataShape::kRecord},
    {"LoadPlan", PickleDataShape::kRecord},
    {"_StorageInfo", PickleDataShape::kRecord},
    {"_StoragePrefix", PickleDataShape::kRecord},
    {"MEM_FORMAT_ENCODING", PickleDataShape::kEnum},
    {"_MEM_FORMAT_ENCODING", PickleDataShape::kEnum},
    {"WriteItemType", PickleDataShape::kEnum},
    {"LoadItemType", PickleDataShape::kEnum},
};

// Named values a TensorProperties holds (torch 1.13 pickles a layout and a memory format by name),
// and the path DCP 2.x records as StorageMeta.checkpoint_id (Python 3.13 defines it in
// pathlib._local).
constexpr ProfileClass kDcpOther[] = {
    {"torch.strided", PickleDataShape::kValue},
    {"torch.sparse_coo", PickleDataShape::kValue},
    {"torch.contiguous_format", PickleDataShape::kValue},
    {"torch.channels_last", PickleDataShape::kValue},
    {"torch.channels_last_3d", PickleDataShape::kValue},
    {"torch.preserve_format", PickleDataShape::kValue},
    {"pathlib.PosixPath", PickleDataShape::kPath},
    {"pathlib.PurePosixPath", PickleDataShape::kPath},
    {"pathlib._local.PosixPath", PickleDataShape::kPath},
    {"pathlib._local.PurePosixPath", PickleDataShape::kPath},
};

// Megatron-Core's subclasses of DCP's Metadata and SavePlan (megatron/core/dist_checkpointing/
// strategies/torch.py), dataclasses like their bases.
constexpr ProfileClass kMegatronMetadata[] = {
    {"megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata", PickleDataShape::kRecord},
    {"megatron.core.dist_checkpointing.strategies.torch.MCoreSavePlan", PickleDataShape::kRecord},
};

// What Megatron's common.pt holds besides torch.load's allowlist: the training arguments
// (argparse.Namespace, a record of plain fields), the enums among them, and the rerun state
// machine's records that Megatron itself adds to torch's safe globals.
constexpr ProfileClass kMegatronCommon[] = {
    {"argparse.Namespace", PickleDataShape::kRecord},
    {"megatron.core.rerun_state_machine.RerunState", PickleDataShape::kRecord},
    {"megatron.core.rerun_state_machine.RerunDiagnostic", PickleDataShape::kEnum},
    {"megatron.core.rerun_state_machine.RerunMode", PickleDataShape::kEnum},
    {"megatron.core.enums.ModelType", PickleDataShape::kEnum},
    {"megatron.core.transformer.enums.AttnBackend", PickleDataShape::kEnum},
    {"megatron.core.transformer.enums.AttnMaskType", PickleDataShape::kEnum},
};

// The list builders TorchScript's unpickler interprets itself (torch/csrc/jit/serialization/
// unpickler.cpp); it resolves no other global from Python.
constexpr ProfileClass kTorchScriptHelpers[] = {
    {"torch.jit._pickle.build_intlist", PickleDataShape::kHelper},
    {"torch.jit._pickle.build_floatlist", PickleDataShape::kHelper},
    {"torch.jit._pickle.build_doublelist", PickleDataShape::kHelper},
    {"torch.jit._pickle.build_boollist", PickleDataShape::kHelper},
    {"torch.jit._pickle.build_tensorlist", PickleDataShape::kHelper},
    {"torch.jit._pickle.build_tensor_from_id", PickleDataShape::kHelper},
    {"torch.jit._pickle.restore_type_tag", PickleDataShape::kHelper},
};

// numpy's RNG state as the trainers save it (np.random.get_state(): ('MT19937', uint32 keys, pos,
// has_gauss, cached_gaussian)), in the RNG files of the trainer folders only: an HF Trainer's
// rng_state*.pth (transformers loads it under torch.serialization.safe_globals of exactly these),
// an Accelerate random_states_<r>.pkl. numpy 2 spells the module numpy._core.
constexpr ProfileClass kTrainerRng[] = {
    {"numpy.core.multiarray._reconstruct", PickleDataShape::kNumpyArray},
    {"numpy._core.multiarray._reconstruct", PickleDataShape::kNumpyArray},
    {"numpy.ndarray", PickleDataShape::kNumpyArray},
    {"numpy.dtype", PickleDataShape::kNumpyArray},
    {"numpy.dtypes.UInt32DType", PickleDataShape::kValue},
};

// What DeepSpeed pickles beside tensors in its model and optimizer states (deepspeed/runtime/
// engine.py, zero/stage_1_and_2.py, stage3.py): its loss scaler's fields, the ZeRO stage enum and
// the fragment addresses of param_slice_mappings, records and an enum of plain fields.
constexpr ProfileClass kDeepSpeedStates[] = {
    {"deepspeed.runtime.fp16.loss_scaler.LossScaler", PickleDataShape::kRecord},
    {"deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler", PickleDataShape::kRecord},
    {"deepspeed.runtime.zero.config.ZeroStageEnum", PickleDataShape::kEnum},
    {"deepspeed.utils.tensor_fragment.fragment_address", PickleDataShape::kRecord},
};

template <size_t N>
std::optional<PickleDataShape> find_in(const ProfileClass (&list)[N], const std::string& full_name) {
  for (const ProfileClass& c : list) {
    if (full_name == c.name) return c.shape;
  }
  return std::nullopt;
}

std::optional<PickleDataShape> dcp_shape(const std::string& full_name) {
  for (const char* module : kDcpModules) {
    if (!starts_with(full_name, module)) continue;
    const std::string cls = full_name.substr(std::string(module).size());
    for (const ProfileClass& c : kDcpClasses) {
      if (cls == c.name) return c.shape;
    }
  }
  return find_in(kDcpOther, full_name);
}

}  // namespace

const char* pickle_profile_name(PickleLoader loader) {
  switch (loader) {
    case PickleLoader::kTorchLoad: return "torch.load weights-only";
    case PickleLoader::kDcpMetadata: return "DCP metadata";
    case PickleLoader::kMegatronMetadata: return "Megatron-Core dist-checkpointing metadata";
    case PickleLoader::kMegatronCommon: return "Megatron-Core common.pt";
    case PickleLoader::kTorchScript: return "TorchScript archive";
    case PickleLoader::kTrainerRng: return "trainer RNG state (numpy)";
    case PickleLoader::kDeepSpeed: return "DeepSpeed states";
  }
  return "torch.load weights-only";
}

std::optional<PickleDataShape> profile_shape(PickleLoader loader, const std::string& full_name) {
  switch (loader) {
    case PickleLoader::kTorchLoad: return std::nullopt;
    case PickleLoader::kDcpMetadata: return dcp_shape(full_name);
    case PickleLoader::kMegatronMetadata: {
      const auto dcp = dcp_shape(full_name);
      return dcp ? dcp : find_in(kMegatronMetadata, full_name);
    }
    case PickleLoader::kMegatronCommon: return find_in(kMegatronCommon, full_name);
    case PickleLoader::kTorchScript:
      // The archive's own TorchScript classes (compiled from its code/ files), never Python imports.
      if (starts_with(full_name, "__torch__.")) return PickleDataShape::kRecord;
      return find_in(kTorchScriptHelpers, full_name);
    case PickleLoader::kTrainerRng: return find_in(kTrainerRng, full_name);
    case PickleLoader::kDeepSpeed: return find_in(kDeepSpeedStates, full_name);
  }
  return std::nullopt;
}

bool enum_member_name_ok(PickleLoader loader, const std::string& enum_class, const std::string& attribute) {
  if (attribute.empty() || attribute[0] == '_') return false;
  for (char c : attribute) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!word) return false;
  }
  if (attribute[0] >= '0' && attribute[0] <= '9') return false;
  // DCP's enums, torch 1.13 to 2.x (torch/distributed/checkpoint/planner.py, metadata.py).
  struct Members {
    const char* enum_name;
    std::initializer_list<const char*> members;
  };
  static const Members kDcpEnums[] = {
      {"WriteItemType", {"TENSOR", "SHARD", "BYTE_IO"}},
      {"LoadItemType", {"TENSOR", "BYTE_IO"}},
      {"MEM_FORMAT_ENCODING", {"TORCH_CONTIGUOUS_FORMAT", "TORCH_CHANNELS_LAST", "TORCH_PRESERVE_FORMAT"}},
      {"_MEM_FORMAT_ENCODING", {"TORCH_CONTIGUOUS_FORMAT", "TORCH_CHANNELS_LAST", "TORCH_PRESERVE_FORMAT"}},
  };
  if (loader == PickleLoader::kDcpMetadata || loader == PickleLoader::kMegatronMetadata) {
    const std::string cls = enum_class.substr(enum_class.rfind('.') + 1);
    for (const Members& e : kDcpEnums) {
      if (cls != e.enum_name || !dcp_shape(enum_class)) continue;
      for (const char* m : e.members) {
        if (attribute == m) return true;
      }
      return false;
    }
  }
  return true;
}

bool used_as(const PickleGlobal& g, PickleDataShape shape) {
  uint32_t allowed = 0;
  switch (shape) {
    case PickleDataShape::kRecord: allowed = kPickleUseConstructed; break;
    case PickleDataShape::kEnum:
      allowed = kPickleUseCalledWithScalar | kPickleUseCalledWithStrings | kPickleUseAttributeRead;
      break;
    case PickleDataShape::kPath: allowed = kPickleUseCalledWithStrings; break;
    case PickleDataShape::kValue: allowed = 0; break;
    case PickleDataShape::kHelper: return true;
    case PickleDataShape::kNumpyArray: allowed = kPickleUseNumpyArray; break;
  }
  return (g.uses & ~allowed) == 0;
}

}  // namespace ckpt
