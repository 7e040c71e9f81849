// A Hugging Face model folder (save_pretrained's weights, configs, a sharded index), or loose
// training files that no trainer's evidence claims (a checkpoint-N/ without trainer_state.json).
#include "base/file_io.h"
#include "base/text.h"
#include "formats/dcp_checkpoint.h"
#include "layouts/layout_registry.h"
#include "layouts/trainer_layout.h"

namespace ckpt {

namespace {

// The names that make a folder a model folder, first found is the evidence.
constexpr const char* kModelFolderMarkers[] = {"trainer_state.json",
                                               "optimizer.pt",
                                               "model.safetensors",
                                               "pytorch_model.bin",
                                               "model.safetensors.index.json",
                                               "pytorch_model.bin.index.json",
                                               "training_args.bin"};

FileRole model_folder_role(const std::string& n) {
  if (ends_with(n, ".index.json") || ends_with(n, ".json")) return FileRole::kConfig;
  if (n == "optimizer.pt") return FileRole::kOptimizer;
  if (n == "training_args.bin") return FileRole::kTrainingArgs;
  if (ends_with(n, ".safetensors") || ends_with(n, ".bin") || ends_with(n, ".pt") || ends_with(n, ".h5"))
    return FileRole::kModel;
  return FileRole::kOther;
}

class ModelFolderLayout final : public Layout {
 public:
  const char* name() const override { return "model_folder"; }
  const char* evidence_rule() const override {
    return "a folder holding model.safetensors, pytorch_model.bin, their index, optimizer.pt, "
           "trainer_state.json or training_args.bin. Excludes ckptcheck's step folders, DCP folders "
           "and any folder a trainer layout claims (its evidence here, or a checkpoint-N below)";
  }
  const char* resume_rule() const override {
    return "from_pretrained reads the weights and configs; nothing else resumes (--weights-only)";
  }
  const char* seal_ranges() const override {
    return "every file whole (nested ones too) and each tensor's range";
  }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (!is_directory(path) || is_native_step_folder(path) || is_dcp_directory(path)) return std::nullopt;
    const std::string evidence = first_file_present(path, kModelFolderMarkers);
    if (evidence.empty()) return std::nullopt;
    const auto trainer = detect_trainer_layout(path);
    if (!trainer.is_ok() || *trainer) return std::nullopt;  // a trainer's folder, sound or refused
    LayoutMatch m = claim("model_folder", evidence, path);
    for (const std::string& n : files_directly_in(path)) {
      const FileRole role = model_folder_role(n);
      m.files.push_back(
          {n, role, role == FileRole::kModel || role == FileRole::kConfig, -1, file_loader_by_name(n)});
    }
    return m;
  }
};

}  // namespace

bool has_model_folder_marker(const std::string& dir) {
  for (const char* marker : kModelFolderMarkers) {
    if (is_regular_file(dir + "/" + marker)) return true;
  }
  return false;
}

const Layout& model_folder_layout() {
  static const ModelFolderLayout layout;
  return layout;
}

}  // namespace ckpt
