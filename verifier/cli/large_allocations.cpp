// The ckptcheck program's operator new: a block of 4 MiB or more is advised into 2 MiB pages
// (base/huge_pages.h) before anyone touches it. Such a block is mapped on its own by glibc, in
// 4 KiB pages, wherever the thread allocating it is; on the bench VM each first touch of one costs
// ~14 us. The blocks this is for are the ones libraries allocate for us: simdjson's index of a
// shard header's structure is made by each header-reading thread, 4 bytes a byte of header, ~12 MB
// touched a thread at 1M chunks (some 3,500 faults each, a tenth of `verify --quick`; issue 44).
// Our own large buffers are advised where they are made; this reaches the rest. Only the amount of
// memory a block's touched pages round up to can change, never what is allocated.
//
// Only in `ckptcheck` (CMakeLists.txt): ckptcheck-train's memory is what the pilot measures, as it
// is, and the library (the Python package, the C++ API) never replaces its host's allocator. Not
// under the sanitizers, whose own operator new pairs with their delete.
#if !defined(__SANITIZE_ADDRESS__)

#include <cstdlib>
#include <new>

#include "base/huge_pages.h"

namespace {

constexpr std::size_t kAdvisedBytes = std::size_t{4} << 20;

// GCC takes a fresh block handed to a `const void*` parameter for a read of uninitialised memory;
// advise_huge_pages reads no byte of it (only its address range goes to madvise).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void* allocate(std::size_t bytes) noexcept {
  void* block = std::malloc(bytes ? bytes : 1);
  if (block && bytes >= kAdvisedBytes) ckpt::advise_huge_pages(block, bytes);
  return block;
}
#pragma GCC diagnostic pop

// What the standard asks of a throwing operator new: the new-handler's turn before bad_alloc.
void* allocate_or_throw(std::size_t bytes) {
  for (;;) {
    if (void* block = allocate(bytes)) return block;
    const std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

// libstdc++'s operator delete frees with free(), which these blocks are for.
void* operator new(std::size_t bytes) {
  return allocate_or_throw(bytes);
}
void* operator new[](std::size_t bytes) {
  return allocate_or_throw(bytes);
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return allocate(bytes);
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return allocate(bytes);
}

#endif
