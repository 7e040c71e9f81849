#include "verifier/check/checkpoint_kind.h"

#include "base/file_io.h"
#include "base/text.h"
#include "layouts/layout_registry.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/check/pickle_gate.h"
#include "verifier/check/seal.h"

namespace ckpt {

const char* checkpoint_kind_name(CheckpointKind kind) {
  switch (kind) {
    case CheckpointKind::kCkptcheck: return "ckptcheck";
    case CheckpointKind::kCkptcheckShard: return "ckptcheck_shard";
    case CheckpointKind::kDcp: return "dcp";
    case CheckpointKind::kMegatronTorchDist: return "megatron_torch_dist";
    case CheckpointKind::kTorchSave: return "torch_save";
    case CheckpointKind::kTorchScript: return "torchscript";
    case CheckpointKind::kTorchSaveLegacy: return "torch_save_legacy";
    case CheckpointKind::kPickle: return "pickle";
    case CheckpointKind::kNumpy: return "numpy";
    case CheckpointKind::kKeras: return "keras";
    case CheckpointKind::kSafetensors: return "safetensors";
    case CheckpointKind::kSafetensorsIndex: return "safetensors_index";
    case CheckpointKind::kHdf5: return "hdf5";
    case CheckpointKind::kHfTrainer: return "hf_trainer";
    case CheckpointKind::kAccelerate: return "accelerate";
    case CheckpointKind::kDeepSpeed: return "deepspeed";
    case CheckpointKind::kModelFolder: return "model_folder";
    case CheckpointKind::kSealedDirectory: return "sealed_directory";
    case CheckpointKind::kUnknownFile: return "unknown_file";
    case CheckpointKind::kAmbiguous: return "ambiguous";
  }
  return "unknown_file";
}

CheckpointKind checkpoint_kind_named(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(CheckpointKind::kAmbiguous); ++k) {
    if (name == checkpoint_kind_name(static_cast<CheckpointKind>(k))) return static_cast<CheckpointKind>(k);
  }
  return CheckpointKind::kUnknownFile;
}

bool kind_holds_pickles(CheckpointKind kind) {
  switch (kind) {
    case CheckpointKind::kDcp:
    case CheckpointKind::kMegatronTorchDist:
    case CheckpointKind::kTorchSave:
    case CheckpointKind::kTorchScript:
    case CheckpointKind::kTorchSaveLegacy:
    case CheckpointKind::kPickle:
    case CheckpointKind::kNumpy:
    case CheckpointKind::kHfTrainer:
    case CheckpointKind::kAccelerate:
    case CheckpointKind::kDeepSpeed:
    case CheckpointKind::kModelFolder:
    case CheckpointKind::kSealedDirectory:
    case CheckpointKind::kUnknownFile:
    case CheckpointKind::kAmbiguous: return true;
    default: return false;
  }
}

std::string seal_subject_of(const LayoutMatch& match, const std::string& path) {
  const Layout* layout = find_layout(match.layout);
  return layout ? layout->seal_subject(match) : path;
}

Result<std::string> resolve_seal_subject(const std::string& raw) {
  const std::string path = strip_trailing_slashes(raw);
  CKPT_ASSIGN_OR_RETURN(const std::optional<LayoutMatch> match, detect_layout(path));
  if (!match) return path;
  CKPT_RETURN_IF_ERROR(match->defect);
  return seal_subject_of(*match, path);
}

std::string seal_subject(const std::string& path) {
  Result<std::string> subject = resolve_seal_subject(path);
  return subject.is_ok() ? *subject : strip_trailing_slashes(path);
}

CheckpointKind detect_checkpoint_kind(const std::string& path) {
  const Result<std::optional<LayoutMatch>> match = detect_layout(path);
  if (!match.is_ok()) return CheckpointKind::kAmbiguous;
  if (!*match) return is_directory(path) ? CheckpointKind::kSealedDirectory : CheckpointKind::kUnknownFile;
  return checkpoint_kind_named((*match)->kind);
}

Result<VerifyTarget> resolve_verify_target(const std::string& raw_path) {
  VerifyTarget target;
  target.path = strip_trailing_slashes(raw_path);
  if (base_name(target.path) == kLatestFileName && !is_directory(target.path)) {
    CKPT_ASSIGN_OR_RETURN(target.path, resolve_latest_checkpoint(parent_dir(target.path)));
  }
  if (!path_exists(target.path)) return Status::io_error(target.path + ": no such file or directory");
  const Result<std::optional<LayoutMatch>> match = detect_layout(target.path);
  if (!match.is_ok()) {
    target.kind = CheckpointKind::kAmbiguous;  // verify_path reports it (reading_ambiguous)
    target.refusal = match.status();
    return target;
  }
  if (!*match) {
    if (!is_directory(target.path)) return target;  // kUnknownFile: verify says what it is instead
    // No layout's evidence and no seal: said as a root with no committed checkpoint would be.
    CKPT_RETURN_IF_ERROR(resolve_latest_checkpoint(target.path).status());
    return Status::not_found(target.path + ": holds no checkpoint");
  }
  target.kind = checkpoint_kind_named((*match)->kind);
  target.match = *match;
  if (target.kind == CheckpointKind::kCkptcheck) {
    // A root (or its `latest`) whose committed checkpoint cannot be found fails here, as it did.
    CKPT_RETURN_IF_ERROR((*match)->defect);
    target.path = (*match)->dir;
  }
  return target;
}

Status refuse_unhonoured_options(CheckpointKind kind, const VerifyOptions& options) {
  const std::string name = checkpoint_kind_name(kind);
  if (!options.current_pins.is_null() && kind != CheckpointKind::kCkptcheck) {
    return Status::invalid_argument("`current_pins`: a " + name +
                                    " checkpoint records no pins to compare; only ckptcheck's own "
                                    "checkpoints do");
  }
  if (options.weights_only && kind == CheckpointKind::kCkptcheck) {
    return Status::invalid_argument(
        "`weights_only`: a ckptcheck checkpoint's manifest always lists the whole training state, so "
        "there is no weights-only check to run; it is for foreign checkpoints");
  }
  if (!options.allowed_globals.empty() && !kind_holds_pickles(kind)) {
    return Status::invalid_argument("`allowed_globals`: a " + name +
                                    " checkpoint holds no pickle, so no global can be allowed");
  }
  for (const std::string& g : options.allowed_globals) {
    if (!is_global_name(g)) {
      return Status::invalid_argument("`allowed_globals` '" + g +
                                      "': expected one MODULE.NAME as torch names it (posix.system, "
                                      "argparse.Namespace), no wildcard");
    }
  }
  return Status::ok();
}

}  // namespace ckpt
