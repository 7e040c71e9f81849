// How a set of tensors is split into N shard files. Large tensors are split along dim 0 into one
// row range per shard (so every shard carries a similar number of bytes and a reader restoring a
// slice reads only the rows it needs); small tensors go whole to the least-loaded shard.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/tensor_file.h"
#include "shards/tensor_view.h"

namespace ckpt {

struct PlannedChunk {
  size_t tensor = 0;        // index into the input tensors
  ChunkInfo info;           // name, component, dtype, global shape, offsets, shape (no file fields yet)
  uint64_t byte_begin = 0;  // where the chunk's bytes start inside the tensor's contiguous bytes
};

struct ShardingPlan {
  std::vector<std::vector<PlannedChunk>> shards;  // shards[i] = chunks of shard i, in write order
};

constexpr uint64_t kDefaultSplitMinBytes = 16 << 10;

// The chunk that is the whole of `t` (offsets all zero, data_bytes set), without file fields.
ChunkInfo whole_chunk(const TensorView& t);

// Deterministic: the same tensors and arguments always give the same plan.
ShardingPlan plan_shards(const std::vector<TensorView>& tensors, size_t num_shards,
                         uint64_t split_min_bytes = kDefaultSplitMinBytes);

// Splits rows [0, rows) into `parts` near-equal contiguous ranges; returns the part boundaries
// (parts+1 values). Shared by sharding and by FSDP's flat-parameter slicing.
std::vector<int64_t> even_split(int64_t rows, size_t parts);

}  // namespace ckpt
