#include "layouts/layout_registry.h"

#include "base/file_io.h"
#include "base/text.h"

namespace ckpt {

const std::vector<const Layout*>& registered_layouts() {
  // An explicit list, not self-registration: a static library drops an object file nothing refers
  // to, and a layout missing from detection would be a silent change of what paths are.
  static const std::vector<const Layout*> layouts = {
      &native_checkpoint_layout(), &single_file_layout(),      &sharded_index_layout(), &dcp_layout(),
      &megatron_layout(),          &hf_trainer_layout(),       &accelerate_layout(),    &deepspeed_layout(),
      &model_folder_layout(),      &sealed_directory_layout(),
  };
  return layouts;
}

const Layout* find_layout(const std::string& name) {
  for (const Layout* layout : registered_layouts()) {
    if (name == layout->name()) return layout;
  }
  return nullptr;
}

std::vector<LayoutMatch> layout_claims(const std::string& raw, const Layout* except) {
  const std::string path = strip_trailing_slashes(raw);
  std::vector<LayoutMatch> claims;
  for (const Layout* layout : registered_layouts()) {
    if (layout == except) continue;
    if (auto match = layout->detect(path)) claims.push_back(std::move(*match));
  }
  return claims;
}

Result<std::optional<LayoutMatch>> detect_layout(const std::string& path) {
  std::vector<LayoutMatch> claims = layout_claims(path);
  if (claims.empty()) return std::optional<LayoutMatch>();
  if (claims.size() == 1) return std::optional<LayoutMatch>(std::move(claims[0]));
  std::string named;
  for (size_t i = 0; i < claims.size(); ++i) {
    named += (i == 0                   ? ""
              : i + 1 == claims.size() ? " and "
                                       : ", ") +
             claims[i].kind + " (" + claims[i].evidence + ")";
  }
  return Status::ambiguous(strip_trailing_slashes(path) + ": is claimed by two layouts, " + named +
                           ": which one reads it decides what must be there; refused (remove the "
                           "other's files, or pass the file or folder you mean)");
}

}  // namespace ckpt
