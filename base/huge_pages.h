// Large buffers that are about to be filled for the first time, backed by 2 MiB pages where the
// kernel gives them (transparent huge pages in `madvise` mode, Debian's default).
//
// Why: on the bench VM a first touch costs ~14 us a 4 KiB page (paravirtualised), and page faults
// were a quarter of `verify --quick` on a 320k-chunk checkpoint (issue 44, docs/performance.md).
// read_small_file reads an 84 MB manifest into such a buffer: one fault per 2 MiB instead of per
// 4 KiB.
#pragma once

#include <cstddef>

namespace ckpt {

// Advises the whole 2 MiB-aligned pages inside [data, data + bytes); a no-op for smaller spans
// or where the kernel refuses (the memory then stays in 4 KiB pages, nothing else changes).
void advise_huge_pages(const void* data, size_t bytes);

// Puts the main heap (glibc's main arena) in huge pages, as the tunable glibc.malloc.hugetlb=1
// would, for a program that builds millions of small records: the metadata pass of a 320k-chunk
// checkpoint makes ~4 allocations a chunk, and a drill's final-state comparison holds every tensor
// of both runs. Measured on that checkpoint: verify --quick 1.9 s -> 1.2 s, verify 2.4 s -> 1.7 s,
// inspect 3.05 s -> 2.15 s, for 10-100 MB more peak RSS (docs/performance.md). The tunable is read
// only at start, from the environment; this does the same from inside main, before any thread:
//   - the heap grows once by ~2 GiB of address space (not of memory: a page becomes resident when
//     first touched, as before), advised as huge pages; later growth is glibc's own, 4 KiB pages;
//   - it is never trimmed, since a heap trimmed and grown again would not keep the advice;
//   - under an RLIMIT_AS or strict overcommit, where that address space would count, it does
//     nothing (a reserved step could make a later allocation fail).
// The threads' own arenas keep 4 KiB pages. Where brk or the advice is refused, nothing changes.
void use_huge_page_heap();

// Gives the pages of freed heap memory back to the system (glibc's malloc_trim). The huge-page heap
// is never trimmed on its own, so what one phase freed (an 84 MB manifest text and its parse, at
// 320k chunks) stays resident, and the next phase's threads, which allocate in their own arenas,
// add to it: called between such phases, it took verify --quick's peak from 249 to 230 MiB
// (issue 44). Only where little is allocated afterwards: the released huge pages come back as
// 4 KiB pages, a fault each, and reading a whole 400 MB state into memory after it (the drill's
// read_state_snapshot) measured 1.5 s -> 2.3 s.
void release_freed_heap();

// Gives back the pages of the free memory at the top of the main heap, and only those: the heap
// keeps its span and its advice, so what is allocated there next is faulted in huge pages again,
// where release_freed_heap leaves 4 KiB pages. For a phase that freed much at the top before one
// whose memory is mostly made elsewhere (the writer threads' heaps): opening a 20,000-tensor
// torch.save file leaves ~150 MB of its parse free, which `convert`'s writing then held beside
// its own (issue 44).
void release_freed_heap_top();

}  // namespace ckpt
