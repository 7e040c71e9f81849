#include "verifier/check/checkpoint_kind.h"

#include "base/file_io.h"
#include "base/text.h"
#include "formats/dcp_checkpoint.h"
#include "formats/keras_archive.h"
#include "formats/megatron_dist_checkpoint.h"
#include "formats/pytorch_file.h"
#include "formats/tensor_file_open.h"
#include "layouts/trainer_layout.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/check/foreign_verifier.h"
#include "verifier/check/pickle_gate.h"
#include "verifier/check/seal.h"

namespace ckpt {

namespace {

// Files are told apart by their first bytes (formats/tensor_file_open.h), never by their names; one
// that cannot be read is of no known kind (its verifier then reports why).
CheckpointKind kind_of_file(const std::string& path) {
  const Result<TensorFileFormat> format = sniff_tensor_file_format(path);
  switch (format.is_ok() ? *format : TensorFileFormat::kUnknown) {
    case TensorFileFormat::kPytorchZip:
      if (is_torchscript_file(path)) return CheckpointKind::kTorchScript;
      return is_keras_file(path) ? CheckpointKind::kKeras : CheckpointKind::kTorchSave;
    case TensorFileFormat::kPytorchLegacy: return CheckpointKind::kTorchSaveLegacy;
    case TensorFileFormat::kPickle: return CheckpointKind::kPickle;
    case TensorFileFormat::kNumpy: return CheckpointKind::kNumpy;
    case TensorFileFormat::kHdf5: return CheckpointKind::kHdf5;
    case TensorFileFormat::kNative: return CheckpointKind::kCkptcheckShard;
    case TensorFileFormat::kSafetensors: return CheckpointKind::kSafetensors;
    case TensorFileFormat::kTar:           // refused when opened (formats/torch_load_dispatch.h)
    case TensorFileFormat::kPickleStream:  // resolved by the path overload; never returned by it
    case TensorFileFormat::kUnknown: break;
  }
  return CheckpointKind::kUnknownFile;
}

}  // namespace

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
  }
  return "unknown_file";
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
    case CheckpointKind::kUnknownFile: return true;
    default: return false;
  }
}

std::string seal_subject(const std::string& path, CheckpointKind kind) {
  return kind == CheckpointKind::kSafetensorsIndex ? parent_dir(path) : path;
}

CheckpointKind detect_checkpoint_kind(const std::string& path) {
  if (!is_directory(path)) {
    const CheckpointKind kind = kind_of_file(path);
    if (kind == CheckpointKind::kUnknownFile && ends_with(path, ".safetensors.index.json"))
      return CheckpointKind::kSafetensorsIndex;
    return kind;
  }
  if (path_exists(path + "/" + kManifestFileName) || step_from_dir_name(base_name(path)) >= 0)
    return CheckpointKind::kCkptcheck;
  if (is_dcp_directory(path)) {
    return path_exists(path + "/" + kMegatronConfigFileName) ? CheckpointKind::kMegatronTorchDist
                                                             : CheckpointKind::kDcp;
  }
  if (const auto layout = detect_trainer_layout(path); !layout.is_ok() || *layout) {
    // A folder of two trainers, or whose `latest` names nothing, is refused by its verifier.
    const TrainerLayoutKind kind = layout.is_ok() ? (*layout)->kind : TrainerLayoutKind::kHfTrainer;
    switch (kind) {
      case TrainerLayoutKind::kHfTrainer: return CheckpointKind::kHfTrainer;
      case TrainerLayoutKind::kAccelerate: return CheckpointKind::kAccelerate;
      case TrainerLayoutKind::kDeepSpeed: return CheckpointKind::kDeepSpeed;
    }
  }
  if (is_foreign_checkpoint_dir(path)) return CheckpointKind::kModelFolder;
  return CheckpointKind::kSealedDirectory;
}

Result<VerifyTarget> resolve_verify_target(const std::string& raw_path) {
  VerifyTarget target;
  target.path = strip_trailing_slashes(raw_path);
  if (base_name(target.path) == kLatestFileName && !is_directory(target.path)) {
    CKPT_ASSIGN_OR_RETURN(target.path, resolve_latest_checkpoint(parent_dir(target.path)));
  }
  if (!path_exists(target.path)) return Status::io_error(target.path + ": no such file or directory");
  target.kind = detect_checkpoint_kind(target.path);
  if (target.kind == CheckpointKind::kSealedDirectory && !has_seal(target.path)) {
    // Neither a checkpoint nor sealed: a root, whose latest committed checkpoint is verified.
    CKPT_ASSIGN_OR_RETURN(target.path, resolve_latest_checkpoint(target.path));
    target.kind = CheckpointKind::kCkptcheck;
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
