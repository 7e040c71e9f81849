// Checkpoints written and read by every rank of a process group. Include only from *_torch.cpp.
//
// Save: replicated tensors (identical on every rank: DDP's model and optimizer, scheduler, data
// cursor...) are spread by plan_shards over one shard file per rank, rank r writing shard r;
// rank-owned tensors (FSDP's row boxes, each rank's "rng.*.rank<r>") go whole into their rank's
// shard. Rank 0 makes the step's temp dir and tells the others its path; every rank writes and
// fsyncs its shard there and reports path, size, hash and chunk list (JSON, all-gathered); rank 0
// writes the manifest and commits (renames) only when every rank reported success. A rank killed
// mid-save makes the collective fail on the others: nothing is committed.
//
// Load: every rank reads, for each tensor of its own layout (Trainer::export_state()), exactly the
// row range it holds: whole tensors for replicated entries, its rows for row boxes, so a
// checkpoint written by P ranks restores into Q ranks of either strategy. Integrity: a chunk read
// whole is hashed against the manifest; a partial read (a chunk only some of whose rows this rank
// needs) is not hashed here, because that would mean reading the whole chunk: its integrity is
// `verify`'s job, which the drill runs on every checkpoint before a resume. The count of such
// reads is reported so a caller can tell.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "fixtures/process_group.h"
#include "fixtures/trainer.h"
#include "shards/checkpoint_writer.h"

namespace ckpt {

struct DistributedSaveOptions {
  std::string format = "native";
  // Called on each rank after its own shard is fsynced, before the manifest exists.
  std::function<void(const std::string& path)> on_own_shard_written;
};

// On every rank: the committed checkpoint (bytes = all shards), or why none was committed.
Result<CommittedCheckpoint> save_distributed_checkpoint(const std::string& root, const TrainingState& state,
                                                        const CheckpointMetadata& metadata,
                                                        ProcessGroup& group,
                                                        const DistributedSaveOptions& options = {});

struct ReshardStats {
  uint64_t bytes_read = 0;
  int64_t whole_chunk_reads = 0;    // hashed against the manifest
  int64_t partial_chunk_reads = 0;  // not hashed here: see the header comment
  std::vector<std::string> absent;  // layout tensors the checkpoint does not hold
};

// Reads the tensors of `layout` (names, and for row boxes their offsets and shapes) from a
// committed checkpoint. Tensors the checkpoint lacks are left out (import_state names them).
Result<std::map<std::string, at::Tensor>> load_distributed_state(const std::string& checkpoint_dir,
                                                                 const Manifest& manifest,
                                                                 const TrainingState& layout,
                                                                 ReshardStats* stats = nullptr);

}  // namespace ckpt
