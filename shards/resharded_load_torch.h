// Loading a checkpoint into a process group of any size. Include only from *_torch.cpp.
// (Saving, for every world size, is write_checkpoint in shards/checkpoint_writer.h.)
//
// Every rank reads, for each tensor of its own layout (Trainer::export_state()), exactly the
// row range it holds: whole tensors for replicated entries, its rows for row boxes, so a
// checkpoint written by P ranks restores into Q ranks of either strategy. Integrity: a chunk read
// whole is hashed against the manifest; a partial read (a chunk only some of whose rows this rank
// needs) is not hashed here, because that would mean reading the whole chunk: its integrity is
// `verify`'s job, which the drill runs on every checkpoint before a resume. The count of such
// reads is reported so a caller can tell.
#pragma once

#include <map>
#include <string>

#include "shards/manifest.h"
#include "shards/training_state_torch.h"

namespace ckpt {

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
