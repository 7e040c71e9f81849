// Do a tensor's chunks tile it exactly? Every element must be covered by exactly one chunk: a gap
// would restore zeros (or garbage) silently, an overlap means two shards disagree about who owns
// the bytes. Chunks are arbitrary N-d boxes (dim-0 row splits, 2-D tensor-parallel grids, ...).
//
// Method: drop out-of-bounds boxes (reported), sort the rest by offsets, and compare each box
// only with the boxes that start before it ends in dim 0 (a sweep). For the common dim-0 split
// that is O(n log n); for grids it degrades towards O(n^2), fine for thousands of chunks. With no
// overlap, the boxes tile the tensor iff their volumes add up to its element count.
#pragma once

#include "shards/manifest.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

// Appends coverage_gap / coverage_overlap / chunk_out_of_bounds errors for `tensor` to `report`.
void check_chunk_coverage(const ManifestTensor& tensor, VerifyReport& report);

}  // namespace ckpt
