// A PyTorch Distributed Checkpoint folder: `.metadata` (a pickle placing every item) and the
// `*.distcp` files it names, or DCP's sharded safetensors (formats/dcp_checkpoint.h).
#include "base/file_io.h"
#include "base/text.h"
#include "formats/dcp_checkpoint.h"
#include "formats/dcp_metadata.h"
#include "formats/megatron_dist_checkpoint.h"
#include "layouts/layout_registry.h"

namespace ckpt {

// The files of a DCP folder, Megatron's too (layouts/megatron_layout.cpp lists its two on top).
std::vector<LayoutFile> dcp_folder_files(const std::string& dir) {
  std::vector<LayoutFile> files;
  for (const std::string& name : list_files_under(dir, 1)) {
    if (name.find('/') != std::string::npos) continue;
    LayoutFile f{name, FileRole::kOther, false, -1, file_loader_by_name(name)};
    if (name == kDcpMetadataFileName) {
      f.role = FileRole::kManifest;
    } else if (ends_with(name, ".distcp") || ends_with(name, ".safetensors")) {
      f.role = FileRole::kShard;
      f.loader = "torch.distributed.checkpoint";
    } else if (name == kMegatronConfigFileName) {
      f.role = FileRole::kConfig;
    } else if (name == kMegatronCommonFileName) {
      f.role = FileRole::kCustomState;
    }
    f.loaded_on_resume = f.role != FileRole::kOther;
    files.push_back(std::move(f));
  }
  return files;
}

namespace {

class DcpLayout final : public Layout {
 public:
  const char* name() const override { return "dcp"; }
  const char* evidence_rule() const override {
    return "a folder holding a `.metadata` file (or DCP's sharded safetensors). Excludes ckptcheck's "
           "step folders (manifest.json, step_* name) and Megatron's (metadata.json beside)";
  }
  const char* resume_rule() const override {
    return "dcp.load reads every item `.metadata` places, from the files it names";
  }
  const char* seal_ranges() const override {
    return "every file whole and each item's byte range inside its .distcp, as `.metadata` places it";
  }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (!is_directory(path) || is_native_step_folder(path) || !is_dcp_directory(path)) return std::nullopt;
    if (path_exists(path + "/" + kMegatronConfigFileName)) return std::nullopt;  // Megatron's
    LayoutMatch m =
        claim("dcp", path_exists(path + "/" + kDcpMetadataFileName) ? ".metadata" : "DCP sharded safetensors",
              path);
    m.files = dcp_folder_files(path);
    return m;
  }
};

}  // namespace

const Layout& dcp_layout() {
  static const DcpLayout layout;
  return layout;
}

}  // namespace ckpt
