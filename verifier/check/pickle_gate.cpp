#include "verifier/check/pickle_gate.h"

#include <algorithm>

#include "base/text.h"

namespace ckpt {

namespace {

// The classes DCP's FileSystemWriter pickles into `.metadata` (torch 1.13's _shard.checkpoint, 2.x's
// checkpoint), their enum of memory formats, and Megatron-Core's Metadata subclass. Each is a
// dataclass or enum rebuilt from plain fields; none is a callable that acts on the world.
bool is_dcp_metadata_class(const std::string& full_name) {
  static const char* kModules[] = {
      "torch.distributed.checkpoint.metadata.", "torch.distributed._shard.checkpoint.metadata.",
      "torch.distributed._shard.sharded_tensor.metadata.", "torch.distributed._shard.metadata."};
  static const char* kClasses[] = {"Metadata",
                                   "TensorStorageMetadata",
                                   "BytesStorageMetadata",
                                   "ChunkStorageMetadata",
                                   "MetadataIndex",
                                   "TensorProperties",
                                   "StorageMeta",
                                   "MEM_FORMAT_ENCODING",
                                   "_MEM_FORMAT_ENCODING",
                                   "ShardMetadata",
                                   "TensorWriteData",
                                   "BytesWriteData"};
  for (const char* m : kModules) {
    if (!starts_with(full_name, m)) continue;
    const std::string cls = full_name.substr(std::string(m).size());
    for (const char* c : kClasses) {
      if (cls == c) return true;
    }
  }
  return full_name == "torch.distributed.checkpoint.filesystem._StorageInfo" ||
         full_name == "torch.distributed._shard.checkpoint.filesystem._StorageInfo" ||
         full_name == "megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata" ||
         // torch.layout and torch.memory_format values a TensorProperties holds.
         full_name == "torch.strided" || full_name == "torch.sparse_coo" ||
         full_name == "torch.contiguous_format" || full_name == "torch.channels_last" ||
         full_name == "torch.preserve_format";
}

// builtins.getattr in a DCP `.metadata` is how Python 3.11+ pickles an enum member
// (getattr(MEM_FORMAT_ENCODING, 'TORCH_CONTIGUOUS_FORMAT')): accepted when every call looked up an
// attribute of a class the loader accepts, and refused otherwise (getattr(posix, 'system')).
bool is_accepted_attribute_lookup(PickleLoader loader, const PickleGlobal& g) {
  if (loader != PickleLoader::kDcpMetadata) return false;
  if (g.name != "builtins.getattr" && g.name != "__builtin__.getattr") return false;
  if (g.other_calls != 0 || g.attribute_lookups.empty()) return false;
  for (const std::string& lookup : g.attribute_lookups) {
    const size_t dot = lookup.rfind('.');
    if (dot == std::string::npos || !is_dcp_metadata_class(lookup.substr(0, dot))) return false;
  }
  return true;
}

}  // namespace

bool pickle_loader_accepts(PickleLoader loader, const std::string& full_name) {
  const size_t dot = full_name.rfind('.');
  if (dot == std::string::npos) return false;
  if (torch_weights_only_allows(full_name.substr(0, dot), full_name.substr(dot + 1))) return true;
  return loader == PickleLoader::kDcpMetadata && is_dcp_metadata_class(full_name);
}

void check_pickle_globals(const std::vector<PickleGlobal>& globals, PickleLoader loader,
                          const std::vector<std::string>& allowed, const std::string& file,
                          const std::string& shard, const std::string& tensor, VerifyReport& report) {
  for (const PickleGlobal& g : globals) {
    if (pickle_loader_accepts(loader, g.name) || is_accepted_attribute_lookup(loader, g)) continue;
    if (std::find(allowed.begin(), allowed.end(), g.name) != allowed.end()) continue;
    const char* allowlist = loader == PickleLoader::kTorchLoad
                                ? "torch.load(weights_only=True)'s allowlist"
                                : "what DCP's metadata reader expects (torch.load's weights-only allowlist "
                                  "and DCP's metadata classes)";
    const std::string where =
        file + (g.pickle.empty() ? "" : ": " + g.pickle) + " @" + hex_offset(g.first_offset);
    report.add_error(verify_code::kPickleGlobalRefused, shard, tensor,
                     where + ": pickle global '" + g.name + "' (" + pickle_global_risk_name(g.risk) +
                         ", named " + std::to_string(g.count) + "x) is outside " + allowlist +
                         "; torch.load(weights_only=False) would " + pickle_global_effect(g.name, g.risk) +
                         ". Nothing was imported or called; after reviewing it, pass --allow-global " +
                         g.name);
  }
}

}  // namespace ckpt
