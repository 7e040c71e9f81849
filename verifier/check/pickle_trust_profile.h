// Trust profiles: which classes the program that reads a checkpoint's pickle rebuilds as plain data,
// so that `verify` accepts them without --allow-global, and only where the pickle uses them as data.
//
// A DCP `.metadata` is read by DCP's own reader (a plain pickle.load), which expects DCP's metadata
// and planner dataclasses and enums (torch.distributed.checkpoint.metadata / .planner /
// .filesystem, and 1.13's torch.distributed._shard.* spellings) and the pathlib path DCP 2.x keeps
// in StorageMeta.checkpoint_id. A Megatron-Core torch_dist checkpoint adds Megatron's own
// dist-checkpointing classes (MCoreMetadata, MCoreSavePlan) to that, and its common.pt the
// argparse.Namespace and rerun-state records Megatron saves there. A TorchScript archive's pickles
// are read by TorchScript's C++ unpickler, which resolves `__torch__.*` to the archive's own
// TorchScript classes and nothing from Python.
//
// "As data" is the shape Python's pickler writes for each: a record (dataclass, Namespace) is
// NEWOBJ(cls, ()) then BUILD with its fields; an enum member is REDUCE(cls, (value,)) or
// getattr(cls, 'NAME'); a path is REDUCE(cls, (part, ...)); a value (torch.strided) is only named.
// The same global called any other way, or named in a pickle of another kind, is refused like any
// other (verifier/check/pickle_gate.h). Nothing is imported or called either way.
#pragma once

#include <optional>
#include <string>

#include "formats/pickle_globals.h"

namespace ckpt {

// Which program reads the pickle.
enum class PickleLoader {
  kTorchLoad,         // torch.load: torch.save files, DCP items
  kDcpMetadata,       // DCP's reader of `.metadata`
  kMegatronMetadata,  // the `.metadata` of a Megatron-Core torch_dist checkpoint
  kMegatronCommon,    // Megatron-Core's common.pt
  kTorchScript,       // torch.jit.load's unpickler (data.pkl, constants.pkl of a TorchScript archive)
  kTrainerRng,        // an HF Trainer's rng_state*.pth, an Accelerate random_states_<r>.pkl (numpy RNG)
  kDeepSpeed,         // DeepSpeed's model and optimizer states (loss scaler, ZeRO stage enum)
};

// "DCP metadata", "Megatron-Core dist-checkpointing", ...: the profile's name in reports.
const char* pickle_profile_name(PickleLoader loader);

enum class PickleDataShape {
  kRecord,      // NEWOBJ(cls, ()) (or copyreg._reconstructor(cls, object, None)), fields by BUILD
  kEnum,        // REDUCE(cls, (value,)), getattr(cls, 'NAME')
  kPath,        // REDUCE(cls, (str, ...))
  kValue,       // only named, never called (torch.strided, torch.contiguous_format)
  kHelper,      // a helper the loader itself interprets (TorchScript's torch.jit._pickle.build_*)
  kNumpyArray,  // numpy's own pickling of an array: _reconstruct(ndarray, (0,), b'b'), dtype(str, bool, bool)
};

// The shape in which `loader`'s profile accepts `full_name` ("module.qualname"), if it does.
std::optional<PickleDataShape> profile_shape(PickleLoader loader, const std::string& full_name);

// Whether `attribute` may be read from the profile's enum `enum_class` by getattr: a member name.
// Where the profile knows the enum's members (DCP's), exactly one of them; otherwise a public
// identifier (letters, digits, '_', not starting with '_'), so never a dunder or private attribute
// (`__init__`, `__class__`, `_missing_`) through which a function's globals could be reached.
bool enum_member_name_ok(PickleLoader loader, const std::string& enum_class, const std::string& attribute);

// Whether every use the pickle made of `g` is one `shape` allows.
bool used_as(const PickleGlobal& g, PickleDataShape shape);

}  // namespace ckpt
