// Thin wrappers over the one save pipeline (shards/checkpoint_writer.h) and the mapped load
// (shards/mapped_checkpoint.h), the same calls `ckptcheck train` makes for a world of one.
#include "api/ckptcheck_torch.h"

#include <exception>
#include <utility>

#include "api/status_conversion.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_writer.h"
#include "shards/mapped_checkpoint.h"
#include "shards/state_codec_torch.h"

namespace ckptcheck {

namespace {

// Where a TrainingState's metadata lives in the manifest: extra.metadata.
constexpr const char* kMetadataKey = "metadata";

// "optimizer.model.w.exp_avg" -> "optimizer"; a name without a dot is its own component.
std::string component_of(const std::string& name) {
  return name.substr(0, name.find('.'));
}

Result<ckpt::TrainingState> internal_state(const TrainingState& state) {
  ckpt::TrainingState out;
  try {
    for (const auto& [name, tensor] : state.tensors) {
      if (!tensor.defined()) return Status::error("save: tensor " + name + " is undefined");
      at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
      out.push_back({name, component_of(name), std::move(cpu)});
    }
  } catch (const std::exception& e) {  // LibTorch's errors stay here (a device copy failed)
    return Status::error(std::string("save: cannot copy a tensor to the CPU: ") + e.what());
  }
  return out;
}

}  // namespace

Result<SavedCheckpoint> save(const std::string& root, const TrainingState& state,
                             const SaveOptions& options) {
  auto tensors = internal_state(state);
  if (!tensors.ok()) return tensors.status();
  auto views = ckpt::save_views_of_state(tensors.value(), /*world_size=*/1);
  if (!views.is_ok()) return public_status(views.status());
  ckpt::CheckpointMetadata metadata;
  metadata.step = state.step;
  metadata.extra[kMetadataKey] = state.metadata;
  ckpt::CheckpointWriteOptions write_options;
  write_options.num_shards = options.shards;
  write_options.format = options.format;
  write_options.jobs = options.jobs;
  auto committed = ckpt::write_checkpoint(root, views->replicated, metadata, write_options);
  if (!committed.is_ok()) return public_status(committed.status());
  return SavedCheckpoint{committed->dir, committed->bytes, committed->seconds};
}

Result<TrainingState> load(const std::string& path) {
  auto dir = ckpt::resolve_checkpoint_path(path);
  if (!dir.is_ok()) return public_status(dir.status());
  auto manifest = ckpt::read_manifest_file(*dir);
  if (!manifest.is_ok()) return public_status(manifest.status());
  auto mapped = ckpt::map_checkpoint_tensors(*dir, *manifest);
  if (!mapped.is_ok()) return public_status(mapped.status());
  auto tensors = ckpt::tensors_from_views(mapped->tensors());
  if (!tensors.is_ok()) return public_status(tensors.status());
  TrainingState state;
  state.step = manifest->step;
  state.tensors = std::move(*tensors);
  const auto found = manifest->extra.find(kMetadataKey);
  if (found != manifest->extra.end() && found->is_object()) {
    for (const auto& [key, value] : found->items()) {
      state.metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  return state;
}

}  // namespace ckptcheck
