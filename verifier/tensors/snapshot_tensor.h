// A tensor of a StateSnapshot (state_snapshot.h): its name, component, dtype and shape at once, and
// its bytes either held, or left in a committed checkpoint whose every chunk was hashed and found as
// recorded when the snapshot was taken. Two tensors of such checkpoints whose chunks lie alike and
// hash alike are bit-identical without being read again; any other pair is read and compared.
// A drill of a 20,000-tensor state held the reference's and the resumed run's 400 MB each and
// compared every element, most of them identical (issue 44).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "shards/tensor_view.h"
#include "verifier/tensors/digest_identity.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {

// A committed checkpoint, open, with every tensor's chunks checked (TensorSource::check_tensors).
// Its files stay open while a tensor of a snapshot refers to it: a snapshot's checkpoint is the
// drill's own copy or a committed checkpoint, whose files are never rewritten in place.
struct CheckedSource {
  TensorSource source;
  ScannedChunkDigests digests;
};

class SnapshotTensor {
 public:
  std::string name;  // as the snapshot names it (a directory's file adds its stem)
  std::string component;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes_size = 0;  // of the whole tensor

  SnapshotTensor() = default;
  // Its bytes held: a tensor read whole (any file that is not a committed checkpoint) or made by a test.
  SnapshotTensor(LoadedTensor loaded);  // NOLINT(google-explicit-constructor): a snapshot of tensors
  // Its bytes left in tensor `tensor` of `checked`'s source, under `name` and `component`.
  SnapshotTensor(std::shared_ptr<const CheckedSource> checked, const SourceTensor& tensor, std::string name,
                 std::string component);

  // Whether it holds its bytes (else they are left in its checkpoint).
  bool held() const { return held_ != nullptr; }
  // Its bytes: those held, or read again from its checkpoint now (and checked again against the
  // hashes recorded there: a file changed since the snapshot is an error, never other bytes).
  Result<std::shared_ptr<const std::vector<uint8_t>>> bytes() const;
  // Its name, component, dtype and shape, no bytes: what layout_mismatch (state_compare.h) compares.
  TensorView layout() const { return {name, component, dtype, shape, nullptr, 0}; }
  // True only when this and `other` lie in checked checkpoints, chunk for chunk with equal digests.
  bool identical_by_digests(const SnapshotTensor& other) const;

 private:
  std::shared_ptr<const std::vector<uint8_t>> held_;
  std::shared_ptr<const CheckedSource> checked_;
  const SourceTensor* in_source_ = nullptr;
};

// How a comparison names a tensor whose bytes it could not read again: "cannot be read again: <why>".
std::string cannot_be_read_again(const Status& why);

// Whether `a` and `b` hold the same bytes: by their digests where those say so, else read and
// compared. An error when a side cannot be read again.
Result<bool> same_bytes(const SnapshotTensor& a, const SnapshotTensor& b);

// compare_tensor (state_compare.h) of two snapshot tensors, with what it gives two bit-identical
// tensors where their digests say they are; a side that cannot be read again is a mismatch that
// says why, not comparable.
TensorDiff compare_snapshot_tensors(const SnapshotTensor& reference, const SnapshotTensor& resumed,
                                    const Tolerance& tolerance);

}  // namespace ckpt
