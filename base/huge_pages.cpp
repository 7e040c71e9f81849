#include "base/huge_pages.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

namespace ckpt {

void advise_huge_pages(const void* data, size_t bytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (start + bytes) & ~(kHugePage - 1);
  if (bytes < kHugePage || end <= first) return;
  (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
}

void use_huge_page_heap() {
  constexpr int kHeapStep = INT_MAX - (2 << 20) + 1;
  constexpr int kMmapThreshold = 128 << 10;  // glibc's default, fixed once M_TOP_PAD is set
  (void)::mallopt(M_TOP_PAD, kHeapStep);
  (void)::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // One block larger than the heap's free top, taken from the heap (not its own mapping), makes
  // malloc grow the heap now, by the block and the step; that fresh span is what gets the advice.
  const size_t block = ::mallinfo2().keepcost + (size_t{1} << 20);
  (void)::mallopt(M_MMAP_THRESHOLD, static_cast<int>(2 * block));  // above the block with its header
  void* first = ::malloc(block);
  (void)::mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  auto* end = static_cast<char*>(::sbrk(0));
  if (first && end != reinterpret_cast<char*>(-1) && end > static_cast<char*>(first))
    advise_huge_pages(first, static_cast<size_t>(end - static_cast<char*>(first)));
  ::free(first);
}

}  // namespace ckpt
