// A shape or an offset: a few non-negative extents, held inline.
//
// Why not std::vector<int64_t>: a manifest holds two of these for each of up to a million chunks
// (issue 44). As vectors they were two heap blocks and four allocator calls a chunk (made while
// parsing, freed at exit), and each chunk check followed two pointers to them. Up to kInline
// extents (every tensor torch writes but a few 5-d ones) sit in the record itself; more go to
// the heap.
//
// DimsView is what functions that only read extents take: a std::vector<int64_t> and a Dims both
// convert to it without a copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace ckpt {

class DimsView {
 public:
  DimsView() = default;
  DimsView(const int64_t* data, size_t size) : data_(data), size_(size) {}
  // Implicit, so that every function taking a view takes the vectors it took before.
  DimsView(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT

  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  friend bool operator==(DimsView a, DimsView b) {
    return a.size_ == b.size_ &&
           (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_ * sizeof(int64_t)) == 0);
  }
  friend bool operator!=(DimsView a, DimsView b) { return !(a == b); }
  friend bool operator<(DimsView a, DimsView b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

class Dims {
 public:
  static constexpr size_t kInline = 4;

  Dims() = default;
  Dims(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Dims(DimsView dims) { assign(dims.data(), dims.size()); }
  Dims(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }  // NOLINT
  Dims(const Dims& other) { assign(other.data(), other.size_); }
  Dims(Dims&& other) noexcept { take(other); }
  Dims& operator=(const Dims& other) {
    if (this != &other) assign(other.data(), other.size_);
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~Dims() { release(); }

  operator DimsView() const { return {data(), size_}; }  // NOLINT: what readers of extents take
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  const int64_t* data() const { return on_heap() ? store_.heap : store_.inline_dims; }
  int64_t* data() { return on_heap() ? store_.heap : store_.inline_dims; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  int64_t& back() { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void push_back(int64_t d) {
    if (size_ == capacity_) grow(2 * size_t{capacity_});
    data()[size_++] = d;
  }

  friend bool operator==(const Dims& a, const Dims& b) { return DimsView(a) == DimsView(b); }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }
  friend bool operator<(const Dims& a, const Dims& b) { return DimsView(a) < DimsView(b); }

 private:
  bool on_heap() const { return capacity_ > kInline; }
  void release() {
    if (on_heap()) delete[] store_.heap;
    capacity_ = kInline;
    size_ = 0;
  }
  void assign(const int64_t* dims, size_t n) {
    size_ = 0;
    if (n > capacity_) grow(n);
    std::copy(dims, dims + n, data());
    size_ = static_cast<uint32_t>(n);
  }
  void take(Dims& other) {
    store_ = other.store_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.capacity_ = kInline;  // the heap block, if any, is this one's now
    other.size_ = 0;
  }
  void grow(size_t capacity) {
    int64_t* bigger = new int64_t[capacity];
    std::copy(data(), data() + size_, bigger);
    if (on_heap()) delete[] store_.heap;
    store_.heap = bigger;
    capacity_ = static_cast<uint32_t>(capacity);
  }

  union Store {
    int64_t inline_dims[kInline];
    int64_t* heap;  // once the extents outgrow inline_dims (capacity_ > kInline)
  } store_ = {};
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
};

}  // namespace ckpt
