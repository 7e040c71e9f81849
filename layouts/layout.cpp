#include "layouts/layout.h"

#include "base/file_io.h"
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

std::vector<std::string> files_directly_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& name : list_files_under(dir, 1)) {
    if (name.find('/') == std::string::npos && is_regular_file(dir + "/" + name)) out.push_back(name);
  }
  return out;
}

bool is_regular_file_in(const std::string& dir, const std::string& name) {
  return is_regular_file(dir + "/" + name);
}

}  // namespace ckpt
