// The one save pipeline, for every world size (a world of one is the degenerate case), in the
// manner of PyTorch DCP's save: plan, write, gather, commit.
//
//   1. rank 0 begins the step's transaction (a temp dir) and tells every rank its path;
//   2. replicated tensors (identical on every rank: DDP's model and optimizer, the scheduler, the
//      data cursor; in a world of one, every tensor) are spread by plan_shards over
//      world x shards_per_rank files; tensors only this rank holds (FSDP row boxes, a rank's RNG
//      stream) go whole into the rank's first file; each rank writes and fsyncs its own files,
//      in parallel threads;
//   3. every rank reports each file's path, size, hash and chunk list (JSON, all-gathered);
//   4. rank 0 writes the manifest and commits (renames) only when every rank reported success.
// A rank killed mid-save makes the gather fail on the others: nothing is committed. Torch-free:
// the ranks talk through a ByteCollective (c10d's ProcessGroup, or SingleProcess).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"
#include "formats/shard_file_writer.h"
#include "shards/manifest.h"
#include "shards/sharding_plan.h"
#include "shards/tensor_view.h"

namespace ckpt {

struct CheckpointWriteOptions {
  size_t num_shards = 1;  // shard files per rank
  std::string format = "native";
  // Where the manifest keeps the chunk records: in the native shard headers alone (version 2, the
  // default: a manifest ~25x smaller, read with the headers every reader reads anyway; builds from
  // 2026-12 read it), or also listed in the manifest (version 1, which every build reads). Shards
  // of another format always get version 1: only a native header holds every field of a record.
  ChunkRecords chunk_records = ChunkRecords::kInShardHeaders;
  uint64_t split_min_bytes = kDefaultSplitMinBytes;
  size_t jobs = 0;  // writer threads; 0 = min(shards, cores)
  // Called on the rank that wrote it after each shard file is fsynced in the temp dir, before the
  // manifest exists (index counts this rank's files from 0). The drill uses it to kill a writer
  // mid-save.
  std::function<void(size_t shard_index, const std::string& path)> on_shard_written;
  // Where the bytes of replicated tensors whose view has no data are read from, by their index in
  // the replicated list, as each writer reaches them (convert: a state is copied, never held).
  const PayloadReader* payload_reader = nullptr;
  // Called on rank 0 once every rank's files are written, before the manifest is: a failure
  // abandons the checkpoint instead of committing it (convert: the source changed while copied).
  std::function<Status()> before_commit;
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

// A tensor only this rank holds: a box of a global tensor (FSDP rows; empty offsets = the whole
// tensor), or this rank's own stream (an RNG state).
struct RankTensor {
  TensorView view;
  std::vector<int64_t> offsets;
  std::vector<int64_t> global_shape;
};

// On every rank: the committed checkpoint (bytes = all ranks' shards; the manifest is filled on
// rank 0 only), or why none was committed.
Result<CommittedCheckpoint> write_checkpoint(const std::string& root,
                                             const std::vector<TensorView>& replicated,
                                             const std::vector<RankTensor>& rank_tensors,
                                             const CheckpointMetadata& metadata,
                                             const CheckpointWriteOptions& options, ByteCollective& group);

// A world of one: every tensor is replicated.
Result<CommittedCheckpoint> write_checkpoint(const std::string& root, const std::vector<TensorView>& tensors,
                                             const CheckpointMetadata& metadata,
                                             const CheckpointWriteOptions& options);

std::string utc_timestamp_now();

}  // namespace ckpt
