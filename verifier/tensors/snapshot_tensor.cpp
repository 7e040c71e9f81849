#include "verifier/tensors/snapshot_tensor.h"

namespace ckpt {

SnapshotTensor::SnapshotTensor(LoadedTensor loaded)
    : name(std::move(loaded.name)),
      component(std::move(loaded.component)),
      dtype(loaded.dtype),
      shape(std::move(loaded.shape)),
      bytes_size(loaded.bytes.size()),
      held_(std::make_shared<const std::vector<uint8_t>>(std::move(loaded.bytes))) {}

SnapshotTensor::SnapshotTensor(std::shared_ptr<const CheckedSource> checked, const SourceTensor& tensor,
                               std::string name_in_snapshot, std::string component_in_snapshot)
    : name(std::move(name_in_snapshot)),
      component(std::move(component_in_snapshot)),
      dtype(tensor.dtype),
      shape(tensor.shape),
      bytes_size(tensor.bytes),
      checked_(std::move(checked)),
      in_source_(&tensor) {}

Result<std::shared_ptr<const std::vector<uint8_t>>> SnapshotTensor::bytes() const {
  if (held_ || !checked_) return held_ ? held_ : std::make_shared<const std::vector<uint8_t>>();
  CKPT_ASSIGN_OR_RETURN(LoadedTensor read, checked_->source.read_tensor(*in_source_));
  return std::make_shared<const std::vector<uint8_t>>(std::move(read.bytes));
}

bool SnapshotTensor::identical_by_digests(const SnapshotTensor& other) const {
  if (!checked_ || !other.checked_) return false;
  const DigestedSource a{checked_->source, checked_->digests, /*checked=*/true};
  const DigestedSource b{other.checked_->source, other.checked_->digests, /*checked=*/true};
  return ckpt::identical_by_digests(a, *in_source_, b, *other.in_source_);
}

std::string cannot_be_read_again(const Status& why) {
  return "cannot be read again: " + why.message();
}

Result<bool> same_bytes(const SnapshotTensor& a, const SnapshotTensor& b) {
  if (a.identical_by_digests(b)) return true;
  if (a.bytes_size != b.bytes_size) return false;
  CKPT_ASSIGN_OR_RETURN(const auto bytes_a, a.bytes());
  CKPT_ASSIGN_OR_RETURN(const auto bytes_b, b.bytes());
  return *bytes_a == *bytes_b;
}

TensorDiff compare_snapshot_tensors(const SnapshotTensor& reference, const SnapshotTensor& resumed,
                                    const Tolerance& tolerance) {
  if (reference.identical_by_digests(resumed)) {
    const size_t size = dtype_size(reference.dtype);
    return identical_tensor_diff(reference.name, reference.component, reference.dtype,
                                 size > 0 ? static_cast<int64_t>(reference.bytes_size / size) : 0);
  }
  const auto unreadable = [&](const Status& why) {
    TensorDiff d;
    d.name = reference.name;
    d.component = reference.component;
    d.mismatch = cannot_be_read_again(why);
    d.comparable = false;
    return d;
  };
  const auto bytes_a = reference.bytes();
  if (!bytes_a.is_ok()) return unreadable(bytes_a.status());
  const auto bytes_b = resumed.bytes();
  if (!bytes_b.is_ok()) return unreadable(bytes_b.status());
  const auto view = [](const SnapshotTensor& t, const std::vector<uint8_t>& bytes) {
    return TensorView{t.name, t.component, t.dtype, t.shape, bytes.data(), bytes.size()};
  };
  return compare_tensor(view(reference, **bytes_a), view(resumed, **bytes_b), tolerance);
}

}  // namespace ckpt
