#include "shards/sharding_plan.h"

#include <algorithm>

namespace ckpt {

std::vector<int64_t> even_split(int64_t rows, size_t parts) {
  std::vector<int64_t> bounds(parts + 1, 0);
  const int64_t n = static_cast<int64_t>(parts);
  for (int64_t i = 0; i <= n; ++i) bounds[static_cast<size_t>(i)] = rows * i / n;
  return bounds;
}

ChunkInfo whole_chunk(const TensorView& t) {
  ChunkInfo c;
  c.name = t.name;
  c.component = t.component;
  c.dtype = t.dtype;
  c.global_shape = t.shape;
  c.offsets.assign(t.shape.size(), 0);
  c.shape = t.shape;
  c.data_bytes = t.bytes;  // the safetensors and HDF5 writers check it against the shape
  return c;
}

ChunkInfo planned_chunk_info(const PlannedChunk& chunk, const TensorView& t) {
  ChunkInfo c = whole_chunk(t);
  if (chunk.rows >= 0) {
    c.offsets[0] = chunk.row_begin;
    c.shape[0] = chunk.rows;
    c.data_bytes = chunk.bytes;
  }
  return c;
}

ShardingPlan plan_shards(const std::vector<TensorView>& tensors, size_t num_shards,
                         uint64_t split_min_bytes) {
  ShardingPlan plan;
  if (num_shards == 0) num_shards = 1;
  plan.shards.resize(num_shards);
  std::vector<uint64_t> load(num_shards, 0);
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const TensorView& t = tensors[ti];
    const bool split = num_shards > 1 && !t.shape.empty() && t.bytes >= split_min_bytes &&
                       t.shape[0] >= static_cast<int64_t>(num_shards);
    if (!split) {
      const size_t target = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      plan.shards[target].push_back({ti, 0, t.bytes});
      load[target] += t.bytes;
      continue;
    }
    const uint64_t row_bytes = t.bytes / static_cast<uint64_t>(t.shape[0]);
    const auto bounds = even_split(t.shape[0], num_shards);
    for (size_t s = 0; s < num_shards; ++s) {
      const int64_t rows = bounds[s + 1] - bounds[s];
      const uint64_t bytes = static_cast<uint64_t>(rows) * row_bytes;
      plan.shards[s].push_back({ti, static_cast<uint64_t>(bounds[s]) * row_bytes, bytes, bounds[s], rows});
      load[s] += bytes;
    }
  }
  return plan;
}

}  // namespace ckpt
