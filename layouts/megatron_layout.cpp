// Megatron-Core's torch_dist checkpoint: a DCP folder with Megatron's metadata.json (its
// sharded_backend) and common.pt (the arguments, iteration and RNG state every rank shares).
#include "base/file_io.h"
#include "formats/dcp_checkpoint.h"
#include "formats/megatron_dist_checkpoint.h"
#include "layouts/layout_registry.h"

namespace ckpt {

namespace {

class MegatronLayout final : public Layout {
 public:
  const char* name() const override { return "megatron_torch_dist"; }
  const char* evidence_rule() const override {
    return "a DCP folder (`.metadata`) holding Megatron's metadata.json. Excludes ckptcheck's step "
           "folders";
  }
  const char* resume_rule() const override {
    return "Megatron's dist_checkpointing.load reads metadata.json, common.pt and every DCP item";
  }
  const char* seal_ranges() const override {
    return "as DCP: every file whole and each item's range; common.pt whole and per tensor";
  }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (!is_directory(path) || is_native_step_folder(path) || !is_dcp_directory(path)) return std::nullopt;
    if (!path_exists(path + "/" + kMegatronConfigFileName)) return std::nullopt;
    LayoutMatch m = claim("megatron_torch_dist", std::string(".metadata + ") + kMegatronConfigFileName, path);
    m.files = dcp_folder_files(path);
    return m;
  }
};

}  // namespace

const Layout& megatron_layout() {
  static const MegatronLayout layout;
  return layout;
}

}  // namespace ckpt
