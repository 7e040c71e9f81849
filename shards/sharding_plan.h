// How a set of tensors is split into N shard files. Large tensors are split along dim 0 into one
// row range per shard (so every shard carries a similar number of bytes and a reader restoring a
// slice reads only the rows it needs); small tensors go whole to the least-loaded shard.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/tensor_file.h"
#include "shards/tensor_view.h"

namespace ckpt {

// One chunk of the plan: a whole tensor, or a range of its dim-0 rows. 40 bytes: a plan of 320,000
// chunks held a ChunkInfo each (~350 bytes with its strings and vectors), all of them while the
// files were written, and that was the largest part of `convert`'s peak (issue 44).
// planned_chunk_info makes the chunk's record when its file is written.
struct PlannedChunk {
  size_t tensor = 0;        // index into the input tensors
  uint64_t byte_begin = 0;  // where the chunk's bytes start inside the tensor's contiguous bytes
  uint64_t bytes = 0;
  int64_t row_begin = 0;  // of a split tensor's rows (dim 0); 0 for a whole tensor
  int64_t rows = -1;      // -1: the whole tensor
};

struct ShardingPlan {
  std::vector<std::vector<PlannedChunk>> shards;  // shards[i] = chunks of shard i, in write order
};

constexpr uint64_t kDefaultSplitMinBytes = 16 << 10;

// The chunk that is the whole of `t` (offsets all zero, data_bytes set), without file fields.
ChunkInfo whole_chunk(const TensorView& t);

// The chunk's record: name, component, dtype, global shape, offsets, shape and data_bytes (no file
// fields yet). `t` is the tensor the chunk is planned from.
ChunkInfo planned_chunk_info(const PlannedChunk& chunk, const TensorView& t);

// Deterministic: the same tensors and arguments always give the same plan.
ShardingPlan plan_shards(const std::vector<TensorView>& tensors, size_t num_shards,
                         uint64_t split_min_bytes = kDefaultSplitMinBytes);

// Splits rows [0, rows) into `parts` near-equal contiguous ranges; returns the part boundaries
// (parts+1 values). Shared by sharding and by FSDP's flat-parameter slicing.
std::vector<int64_t> even_split(int64_t rows, size_t parts);

}  // namespace ckpt
