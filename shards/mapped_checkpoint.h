// Loads a committed checkpoint as tensor views over memory-mapped shard files (zero-copy, in the
// manner of safetensors) instead of reading every byte into a second buffer:
//   - a tensor stored as one chunk is a view straight into its file's mapping;
//   - a tensor split along dim 0 over shards whose pieces are page-aligned (the native writer
//     aligns large payloads to 4 KiB for this) is one contiguous mapping stitched from them;
//   - anything else (N-d chunks, unaligned safetensors offsets) is assembled into a buffer.
// Chunk hashes are checked against the manifest by several threads at once, each reading the
// bytes where the view will see them, so nothing is hashed twice or copied to be hashed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "shards/checkpoint_reader.h"
#include "shards/manifest.h"
#include "shards/tensor_view.h"

namespace ckpt {

class MappedCheckpoint {
 public:
  // In manifest order; each stays valid while this object lives.
  const std::vector<TensorView>& tensors() const { return views_; }
  // Bytes served without a copy (whole-chunk views plus stitched tensors), for reports.
  uint64_t zero_copy_bytes() const { return zero_copy_bytes_; }

  // For the loader: a tensor, and memory its views point into.
  void add(TensorView view, bool zero_copy) {
    if (zero_copy) zero_copy_bytes_ += view.bytes;
    views_.push_back(std::move(view));
  }
  void keep(std::shared_ptr<const void> storage) { storage_.push_back(std::move(storage)); }

 private:
  std::vector<TensorView> views_;
  std::vector<std::shared_ptr<const void>> storage_;  // file mappings, stitched mappings, buffers
  uint64_t zero_copy_bytes_ = 0;
};

// Errors name the shard, the offset, the chunk and the tensor, as load_checkpoint_tensors does.
Result<MappedCheckpoint> map_checkpoint_tensors(const std::string& checkpoint_dir, const Manifest& manifest,
                                                const LoadOptions& options = {});

}  // namespace ckpt
