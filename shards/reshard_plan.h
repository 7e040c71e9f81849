// Resharding: which bytes of which checkpoint chunks a rank must read to assemble rows
// [row_begin, row_end) of a global tensor, whatever world size wrote the checkpoint. Torch-free.
//
// Every chunk the sharding plan and FSDP write is a ROW box: it spans the full extent of every
// dim but the first (1-D tensors: a range of elements; 0-D: the whole scalar). The overlap of a
// row box with the target rows is a contiguous byte range of the chunk's payload, so a partial
// read is a single `TensorFile::read_chunk(index, offset, out, length)`.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "shards/manifest.h"

namespace ckpt {

struct ChunkRead {
  size_t chunk = 0;            // index into ManifestTensor::chunks
  uint64_t chunk_offset = 0;   // first byte to read inside the chunk's payload
  uint64_t length = 0;         // bytes to read
  uint64_t target_offset = 0;  // where they go in the target rows' contiguous buffer
  bool whole_chunk = false;    // the read covers the chunk's entire payload (its hash can be checked)
};

struct RowReadPlan {
  uint64_t target_bytes = 0;     // (row_end - row_begin) rows
  std::vector<ChunkRead> reads;  // ascending target_offset, covering target_bytes exactly once
};

// Fails (corruption) if a chunk is not a row box, chunks overlap, or the rows are not fully
// covered; invalid_argument if the rows are outside the tensor.
Result<RowReadPlan> plan_row_reads(const ManifestTensor& tensor, int64_t row_begin, int64_t row_end);

}  // namespace ckpt
