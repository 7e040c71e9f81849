// Extents that many records hold the same: one copy, shared, never changed.
//
// Why not Dims: a DCP checkpoint's million chunks and million storage items (issue 44) hold three
// extents each, 40 bytes apiece inline, and almost all of them repeat: every chunk of a tensor
// sharded evenly has the same sizes, and a rank's shard starts at the same offsets in every tensor
// of one shape. A reader that shares equal extents (formats/dcp_metadata_reader.cpp) holds them
// once; a SharedDims is one pointer pair. Made from extents of its own, it holds its own copy.
//
// It reads as Dims does, and converts to DimsView for functions that only read extents.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "base/dims.h"

namespace ckpt {

class SharedDims {
 public:
  SharedDims() = default;
  SharedDims(DimsView dims) : dims_(std::make_shared<const Dims>(dims)) {}      // NOLINT
  SharedDims(const std::vector<int64_t>& dims) : SharedDims(DimsView(dims)) {}  // NOLINT
  SharedDims(const Dims& dims) : dims_(std::make_shared<const Dims>(dims)) {}   // NOLINT
  SharedDims(std::initializer_list<int64_t> dims) : dims_(std::make_shared<const Dims>(dims)) {}

  operator DimsView() const { return dims_ ? DimsView(*dims_) : DimsView(); }  // NOLINT
  std::vector<int64_t> to_vector() const { return DimsView(*this).to_vector(); }
  const int64_t* data() const { return DimsView(*this).data(); }
  size_t size() const { return dims_ ? dims_->size() : 0; }
  bool empty() const { return size() == 0; }
  int64_t operator[](size_t i) const { return (*dims_)[i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size(); }

  friend bool operator==(const SharedDims& a, const SharedDims& b) {
    return a.dims_ == b.dims_ || DimsView(a) == DimsView(b);
  }
  friend bool operator!=(const SharedDims& a, const SharedDims& b) { return !(a == b); }
  friend bool operator<(const SharedDims& a, const SharedDims& b) { return DimsView(a) < DimsView(b); }

 private:
  std::shared_ptr<const Dims> dims_;
};

}  // namespace ckpt
