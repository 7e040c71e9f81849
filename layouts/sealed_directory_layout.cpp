// A folder that only its seal describes: files of no layout of their own (a tokenizer, a few
// torch.save files), sealed with `ckptcheck seal DIR`.
#include "base/file_io.h"
#include "layouts/layout_registry.h"
#include "layouts/seal_files.h"

namespace ckpt {

namespace {

class SealedDirectoryLayout final : public Layout {
 public:
  const char* name() const override { return "sealed_directory"; }
  const char* evidence_rule() const override {
    return "a folder holding ckptcheck.seal.json or integrity.json. Excludes any folder another "
           "layout claims: a sealed DCP or trainer folder is that kind, its seal checked beside";
  }
  const char* resume_rule() const override { return "none of its own: the seal lists what it holds"; }
  const char* seal_ranges() const override {
    return "every file whole and each tensor's range, as the seal lists them";
  }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (!is_directory(path)) return std::nullopt;
    const std::string evidence =
        first_file_present(path, std::vector<std::string>{kSealFileName, kIntegrityFileName});
    if (evidence.empty() || !layout_claims(path, this).empty()) return std::nullopt;
    LayoutMatch m = claim("sealed_directory", evidence, path);
    for (const std::string& n : files_directly_in(path)) {
      const bool seal =
          n == kSealFileName || n == kIntegrityFileName || n == std::string(kSealFileName) + ".sig";
      m.files.push_back({n, seal ? FileRole::kSeal : FileRole::kOther, false, -1, file_loader_by_name(n)});
    }
    return m;
  }
};

}  // namespace

const Layout& sealed_directory_layout() {
  static const SealedDirectoryLayout layout;
  return layout;
}

}  // namespace ckpt
