#include "layouts/layout.h"

#include "base/text.h"

namespace ckpt {

const char* file_role_name(FileRole role) {
  switch (role) {
    case FileRole::kModel: return "model";
    case FileRole::kOptimizer: return "optimizer";
    case FileRole::kScheduler: return "scheduler";
    case FileRole::kScaler: return "scaler";
    case FileRole::kRng: return "rng";
    case FileRole::kTrainerState: return "trainer state";
    case FileRole::kTrainingArgs: return "training arguments";
    case FileRole::kCustomState: return "custom state";
    case FileRole::kConfig: return "config";
    case FileRole::kLatestTag: return "latest tag";
    case FileRole::kManifest: return "manifest";
    case FileRole::kShard: return "shard";
    case FileRole::kSeal: return "seal";
    case FileRole::kOther: return "other";
  }
  return "other";
}

std::string file_loader_by_name(const std::string& name) {
  if (ends_with(name, ".safetensors")) return "safetensors";
  if (ends_with(name, ".json") || name == "latest") return "json/text";
  if (ends_with(name, ".h5") || ends_with(name, ".hdf5")) return "h5py";
  if (ends_with(name, ".npy") || ends_with(name, ".npz")) return "numpy.load";
  if (ends_with(name, ".keras")) return "keras.saving.load_model";
  if (ends_with(name, ".cks")) return "ckptcheck native shard";
  if (ends_with(name, ".distcp") || name == ".metadata") return "torch.distributed.checkpoint";
  return "torch.load";
}

}  // namespace ckpt
