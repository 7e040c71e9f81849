// The checkpoint the verify and memory rows read: written by the tool itself (write_checkpoint),
// not hand-made, so the bench measures the files users actually verify.
#include "bench/bench.h"
#include "bench/synthetic_state_torch.h"
#include "shards/checkpoint_writer.h"
#include "shards/state_codec_torch.h"

namespace ckpt::bench {

Result<BenchCheckpoint> write_synthetic_checkpoint(const std::string& root, uint64_t total_bytes,
                                                   size_t shards, uint64_t seed) {
  const TrainingState state = make_synthetic_state(total_bytes, seed);
  CKPT_ASSIGN_OR_RETURN(auto views, views_of_state(state));
  CheckpointWriteOptions options;
  options.num_shards = shards;
  CheckpointMetadata metadata;
  metadata.step = 1000;
  CKPT_ASSIGN_OR_RETURN(CommittedCheckpoint committed, write_checkpoint(root, views, metadata, options));
  BenchCheckpoint checkpoint;
  checkpoint.root = root;
  checkpoint.dir = committed.dir;
  checkpoint.bytes = committed.bytes;
  checkpoint.write_seconds = committed.seconds;
  for (const auto& shard : committed.manifest.shards)
    checkpoint.shard_paths.push_back(committed.dir + "/" + shard.path);
  return checkpoint;
}

}  // namespace ckpt::bench
