// An allocator for a reader's large working arrays: blocks of 1 MiB and more get an anonymous
// mapping of their own, which freeing unmaps.
//
// Why: the program's heap keeps what it frees (base/huge_pages.h turns trimming off and advises the
// heap into 2 MiB pages). A parse whose working arrays (a pickle memo of 13 M entries, a vector that
// doubles as it grows) are freed before its results are made left those pages resident, and the
// results, a mix of small blocks, did not fill them: the DCP parse at 1M chunks peaked 56 MB above
// what it held (issue 44). In mappings of their own, freed arrays go back to the system at once,
// in 4 KiB pages, and the heap holds only what outlives the parse.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace ckpt {

template <class T>
class MappedAllocator {
 public:
  using value_type = T;
  static constexpr size_t kMappedBytes = size_t{1} << 20;

  MappedAllocator() = default;
  template <class U>
  MappedAllocator(const MappedAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator does

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kMappedBytes) return static_cast<T*>(::operator new(bytes));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kMappedBytes) {
      ::operator delete(p);
    } else {
      (void)::munmap(p, bytes);
    }
  }

  template <class U>
  bool operator==(const MappedAllocator<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const MappedAllocator<U>&) const {
    return false;
  }
};

}  // namespace ckpt
