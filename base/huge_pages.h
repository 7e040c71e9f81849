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

}  // namespace ckpt
