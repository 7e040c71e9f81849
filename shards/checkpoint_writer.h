// Writes a set of tensors as one committed, sharded checkpoint (plan -> shard files -> manifest ->
// atomic commit). Shards are written in parallel, each by its own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/status.h"
#include "shards/manifest.h"
#include "shards/sharding_plan.h"
#include "shards/tensor_view.h"

namespace ckpt {

struct CheckpointWriteOptions {
  size_t num_shards = 1;
  std::string format = "native";
  uint64_t split_min_bytes = kDefaultSplitMinBytes;
  size_t jobs = 0;  // writer threads; 0 = min(shards, cores)
  // Called after each shard file is fsynced in the temp dir, before the manifest exists. The drill
  // uses it to kill a writer mid-save.
  std::function<void(size_t shard_index, const std::string& path)> on_shard_written;
};

struct CheckpointMetadata {
  int64_t step = 0;
  int64_t world_size = 1;
  std::string strategy = "single";
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json pins = nlohmann::json::object();
  nlohmann::json extra = nlohmann::json::object();
};

struct CommittedCheckpoint {
  std::string dir;
  uint64_t bytes = 0;
  double seconds = 0;
  Manifest manifest;
};

std::string shard_file_name(size_t index, size_t count, const std::string& extension);

Result<CommittedCheckpoint> write_checkpoint(const std::string& root, const std::vector<TensorView>& tensors,
                                             const CheckpointMetadata& metadata,
                                             const CheckpointWriteOptions& options);

// A manifest holding the metadata and no shards or tensors yet.
Manifest manifest_skeleton(const CheckpointMetadata& metadata);

// The manifest entries of tensors whose chunks were written to shard files (also used by
// distributed saves, where rank 0 merges every rank's written files).
void add_written_chunks(Manifest& manifest, size_t shard_index, const std::vector<ChunkInfo>& chunks);

std::string utc_timestamp_now();

}  // namespace ckpt
