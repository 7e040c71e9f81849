#include "base/huge_pages.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdio>

namespace ckpt {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// The whole 2 MiB pages inside [data, data + bytes): what advice and release act on, so that a
// page partly in use elsewhere is never touched. Empty (first == end) where there is none.
struct WholeHugePages {
  uintptr_t first = 0;
  uintptr_t end = 0;
  size_t bytes() const { return end - first; }
};

WholeHugePages whole_huge_pages(const void* data, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (start + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  const uintptr_t end = (start + bytes) & ~(uintptr_t{kHugePage} - 1);
  if (end <= first) return {};
  return {first, end};
}

}  // namespace

void advise_huge_pages(const void* data, size_t bytes) {
  const WholeHugePages pages = whole_huge_pages(data, bytes);
  if (pages.bytes() > 0) (void)::madvise(reinterpret_cast<void*>(pages.first), pages.bytes(), MADV_HUGEPAGE);
}

namespace {

// Where address space is what is counted (an RLIMIT_AS, or vm.overcommit_memory=2 charging every
// writable mapping), a reserved step could make a later allocation fail: there the heap stays as
// glibc has it.
bool address_space_is_limited() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur != RLIM_INFINITY) return true;
  std::FILE* f = std::fopen("/proc/sys/vm/overcommit_memory", "r");
  if (!f) return false;
  int mode = 0;
  const bool read = std::fscanf(f, "%d", &mode) == 1;
  std::fclose(f);
  return read && mode == 2;
}

}  // namespace

void use_huge_page_heap() {
  if (address_space_is_limited()) return;
  constexpr int kHeapStep = INT_MAX - static_cast<int>(kHugePage) + 1;  // ~2 GiB, whole huge pages
  constexpr int kTopPad = 128 << 10;                                    // glibc's default growth pad
  constexpr int kMmapThreshold = 128 << 10;  // glibc's default, fixed once the pad is set
  // One block larger than all the heap's free memory together, taken from the heap (not its own
  // mapping), makes malloc grow the heap now, by the block and the step; that fresh span is what
  // gets the advice. Later growth is glibc's own, a pad at a time, in 4 KiB pages. Larger than the
  // free top alone was not enough: a process whose heap had a hole larger than its top (the unit
  // tests' fork of itself) got the block in the hole, and no span was advised.
  const size_t block = ::mallinfo2().fordblks + (size_t{1} << 20);
  // The block is taken from the heap only below glibc's largest mmap threshold (32 MiB, twice the
  // block): a heap with more free memory than that is left as glibc has it.
  if (block > kHugePage * 8) return;
  // Freed, the block joins the step at the top; together they must stay under the trim threshold,
  // or that free gives the whole step back (as it did when the block was 8 MB).
  const int step = kHeapStep - static_cast<int>((block + kHugePage - 1) / kHugePage * kHugePage);
  (void)::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  (void)::mallopt(M_TOP_PAD, step);
  (void)::mallopt(M_MMAP_THRESHOLD, static_cast<int>(2 * block));  // above the block with its header
  void* first = ::malloc(block);
  (void)::mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  (void)::mallopt(M_TOP_PAD, kTopPad);
  auto* end = static_cast<char*>(::sbrk(0));
  if (first && end != reinterpret_cast<char*>(-1) && end > static_cast<char*>(first))
    advise_huge_pages(first, static_cast<size_t>(end - static_cast<char*>(first)));
  ::free(first);
}

void release_freed_heap() {
  (void)::malloc_trim(0);
}

void release_freed_heap_top() {
  const size_t top = ::mallinfo2().keepcost;  // the free chunk at the main heap's top
  if (top < 2 * kHugePage) return;
  // Taken by malloc (it is the top chunk, or a free chunk at least as large), the span is this
  // thread's while its pages are dropped: no other thread can be handed a part of it meanwhile,
  // and malloc keeps its bookkeeping outside the span's body.
  const size_t bytes = top - kHugePage;
  void* span = ::malloc(bytes);
  if (!span) return;
  // Whole huge pages only: each comes back as a huge page on its next touch.
  const WholeHugePages pages = whole_huge_pages(span, bytes);
  if (pages.bytes() > 0) (void)::madvise(reinterpret_cast<void*>(pages.first), pages.bytes(), MADV_DONTNEED);
  ::free(span);
}

}  // namespace ckpt
