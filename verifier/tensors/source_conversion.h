// A tensor source rewritten as a new committed checkpoint (`ckptcheck convert`), with memory that
// stays flat as the state grows: every chunk of the source is checked first
// (TensorSource::check_tensors: coverage and every hash its files or manifest record, with the
// first failure), and then each shard writer reads its chunks' bytes from the source as it writes
// them, into its own buffers. Before, the whole state was read into memory and handed over as
// views: a 400 MB state took 1 GB, and a state larger than the machine's memory could not be
// converted at all.
//
// A chunk that is a run of its tensor's bytes (a dim-0 split, a whole tensor) is read with one read
// per piece a writer asks for; a box of a column split (as DCP and FSDP write) with one per row of
// its last dim. A tensor with a chunk outside it, or in a file that cannot be stamped as a regular
// file (below), is read whole, checked, and held until written.
//
// Checking and copying are two reads, so the source's files are stamped (base/file_stamp.h) before
// the check and compared once every shard is written, before the manifest: a file written,
// replaced or resized in between fails the conversion and nothing is committed.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/file_stamp.h"
#include "base/status.h"
#include "shards/checkpoint_writer.h"
#include "shards/tensor_view.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {

class SourceConversion final : public PayloadReader {
 public:
  // Stamps the source's files, checks every chunk, and reads whole the tensors that are held.
  // Fails with the source's first damage (kCorruption) or read error.
  static Result<SourceConversion> check(const TensorSource& source);

  // Writes and commits the checkpoint; the source must outlive this call. Failures are the
  // writer's (about `root`), or kIoError naming a source file that changed since check().
  Result<CommittedCheckpoint> write(const std::string& root, const CheckpointMetadata& metadata,
                                    CheckpointWriteOptions options) const;

  // The tensors in the source's order: held ones with their bytes, streamed ones without.
  const std::vector<TensorView>& views() const { return views_; }
  size_t held_tensor_count() const { return held_.size(); }

  // From the source, for the writers: only a tensor not held is read so (a held one's view has its
  // bytes, which the writers take from memory).
  Status read(size_t tensor, uint64_t byte_begin, uint8_t* out, size_t length) const override;

  // Bytes copied from the source so far, of those write() copies (the tensors not held): called
  // from the writers' threads, one at a time, each 1/200 of the total and at the end.
  void on_progress(std::function<void(uint64_t done, uint64_t total)> report);

 private:
  explicit SourceConversion(const TensorSource& source) : source_(&source) {}
  Status unchanged() const;

  const TensorSource* source_;
  std::vector<std::pair<std::string, FileStamp>> stamps_;  // by file of the source
  std::vector<LoadedTensor> held_;
  std::vector<TensorView> views_;
  std::function<void(uint64_t, uint64_t)> report_progress_;
  uint64_t streamed_bytes_ = 0;
  // Shared with the writers' threads; a unique_ptr so that the conversion stays movable.
  struct Copied {
    std::mutex mu;
    uint64_t bytes = 0;
    uint64_t reported = 0;
  };
  std::unique_ptr<Copied> copied_ = std::make_unique<Copied>();
};

}  // namespace ckpt
