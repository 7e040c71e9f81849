// ckptcheck's own checkpoints: a step folder (manifest.json and the shards it names), found also
// from its root (`latest`, or the newest committed step_* folder) and from `ROOT/latest` itself.
#include "base/file_io.h"
#include "base/text.h"
#include "layouts/layout_registry.h"
#include "layouts/seal_files.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"

namespace ckpt {

bool is_native_step_folder(const std::string& dir) {
  return path_exists(dir + "/" + kManifestFileName) || step_from_dir_name(base_name(dir)) >= 0;
}

namespace {

std::vector<LayoutFile> native_step_files(const std::string& dir) {
  std::vector<LayoutFile> files;
  for (const std::string& name : list_files_under(dir, 1)) {
    if (name.find('/') != std::string::npos) continue;
    LayoutFile f{name, FileRole::kShard, true, -1, file_loader_by_name(name)};
    if (name == kManifestFileName) {
      f.role = FileRole::kManifest;
    } else if (name == kSealFileName || name == kIntegrityFileName || ends_with(name, ".sig")) {
      f.role = FileRole::kSeal;
      f.loaded_on_resume = false;
    }
    files.push_back(std::move(f));
  }
  return files;
}

class NativeCheckpointLayout final : public Layout {
 public:
  const char* name() const override { return "native_checkpoint"; }
  const char* evidence_rule() const override {
    return "a folder holding manifest.json, or named step_NNNNNNNN (uncommitted without one); a root: "
           "`latest` naming a step_* folder, or step_* folders (the newest committed is the "
           "checkpoint); ROOT/latest itself. Excludes a root holding its own seal (sealed_directory)";
  }
  const char* resume_rule() const override {
    return "the manifest lists the whole training state; `train --resume` reads every shard it names";
  }
  const char* seal_ranges() const override {
    return "manifest.json.sig signs the manifest, whose chunk SHA-256s cover every shard payload; a "
           "seal adds each file whole, its pieces and each tensor's payload range";
  }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (base_name(path) == kLatestFileName && is_regular_file(path)) {
      // ROOT/latest names the checkpoint as the root does; DeepSpeed's `latest` names no step_*.
      const CheckpointListing listing = list_checkpoints(parent_dir(path));
      if (step_from_dir_name(listing.latest_pointer) < 0) return std::nullopt;
      return root_match(parent_dir(path), path, "latest -> " + listing.latest_pointer);
    }
    if (!is_directory(path)) return std::nullopt;
    if (path_exists(path + "/" + kManifestFileName)) return step_match(path, kManifestFileName);
    if (step_from_dir_name(base_name(path)) >= 0)
      return step_match(path, "a step_* folder name (no manifest.json: never committed)");
    // A root. One that holds its own seal was sealed as a folder: its seal describes it.
    if (path_exists(path + "/" + kSealFileName) || path_exists(path + "/" + kIntegrityFileName))
      return std::nullopt;
    const CheckpointListing listing = list_checkpoints(path);
    if (step_from_dir_name(listing.latest_pointer) >= 0)
      return root_match(path, path, "latest -> " + listing.latest_pointer);
    if (!listing.committed.empty() || !listing.uncommitted.empty()) {
      return root_match(path, path,
                        std::to_string(listing.committed.size()) + " committed and " +
                            std::to_string(listing.uncommitted.size()) + " uncommitted step_* folders");
    }
    return std::nullopt;
  }

 private:
  LayoutMatch step_match(const std::string& dir, const std::string& evidence) const {
    LayoutMatch m = claim("ckptcheck", evidence, dir);
    m.files = native_step_files(dir);
    return m;
  }

  LayoutMatch root_match(const std::string& root, const std::string& given,
                         const std::string& evidence) const {
    Result<std::string> resolved = resolve_latest_checkpoint(root);
    LayoutMatch m = step_match(resolved.is_ok() ? *resolved : root, evidence);
    if (!resolved.is_ok()) {
      m.files.clear();
      m.defect = resolved.status();
    }
    m.given = given;
    return m;
  }
};

}  // namespace

const Layout& native_checkpoint_layout() {
  static const NativeCheckpointLayout layout;
  return layout;
}

}  // namespace ckpt
