// The ckptcheck program's operator new: a block of 2 MiB or more is advised into 2 MiB pages
// (base/huge_pages.h) before anyone touches it, and one under 64 MiB also starts on a 2 MiB
// boundary. A thread other than the main one gets such a block from glibc in 4 KiB pages, at an
// address no huge page can start from: advised as it came, its first 2 MiB (and all of a block
// under 4 MiB) stayed in 4 KiB pages. On the bench VM each first touch of one costs ~14 us. The
// blocks this is for are mostly made by libraries and the standard library for us, in the threads
// that read shard headers: the string each header is read into, and simdjson's index of its
// structure (4 bytes a byte of header: ~12 MB touched a thread at 1M chunks, some 3,500 faults
// each, a tenth of `verify --quick`; issue 44). At most 2 MiB of address space is added to a block,
// never memory: a page is resident once touched, as before, and the block's last partial huge
// page stays in 4 KiB pages.
//
// Only in `ckptcheck` (CMakeLists.txt): ckptcheck-train's memory is what the pilot measures, as it
// is, and the library (the Python package, the C++ API) never replaces its host's allocator. Not
// under the sanitizers, whose own operator new pairs with their delete.
#if !defined(__SANITIZE_ADDRESS__)

#include <stdlib.h>  // posix_memalign

#include <cstdlib>
#include <new>

#include "base/huge_pages.h"

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
// Larger blocks are not aligned: glibc serves them from the main heap's top as well (its huge-page
// span, base/huge_pages.h), and an aligned one leaves up to 2 MiB free before it, where small blocks
// then settle and keep the freed space of the large ones from being reused: aligning every block
// took convert's peak at 1M chunks from 700 to 1,001 MB. Those that matter (a manifest's text, a
// shard header, simdjson's index of one at 320k chunks) are below this.
constexpr std::size_t kAlignedBelow = 32 * kHugePage;

// GCC takes a fresh block handed to a `const void*` parameter for a read of uninitialised memory;
// advise_huge_pages reads no byte of it (only its address range goes to madvise).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void* allocate(std::size_t bytes) noexcept {
  if (bytes < kHugePage) return std::malloc(bytes ? bytes : 1);
  void* block = nullptr;
  if (bytes < kAlignedBelow) {
    if (::posix_memalign(&block, kHugePage, bytes) != 0) return nullptr;
  } else {
    block = std::malloc(bytes);
    if (!block) return nullptr;
  }
  // Only the huge pages wholly inside the block: its last, partial one stays in 4 KiB pages, so a
  // block never holds more resident memory than it touches, rounded to 4 KiB (rounded up to whole
  // huge pages, a diff of the two 320k-chunk checkpoints held 46 MB more).
  ckpt::advise_huge_pages(block, bytes);
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

// libstdc++'s operator delete frees with free(), as malloc's and posix_memalign's blocks are.
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
