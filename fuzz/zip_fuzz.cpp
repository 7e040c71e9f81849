// ZipArchive (formats/zip_archive.h) on arbitrary bytes: open, then read every entry it accepted.
// An accepted entry must be readable: open() bounds every entry by the file size.
#include <cstddef>
#include <cstdint>

#include "formats/zip_archive.h"
#include "fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto source = ckpt::fuzz::memory_source(data, size);
  auto zip = ckpt::ZipArchive::open(*source);
  if (!zip.is_ok()) return 0;
  for (const auto& entry : zip->entries()) {
    if (zip->find(entry.name) == nullptr) ckpt::fuzz::invariant_broken("find() misses an entry");
    if (!zip->read(*source, entry, 1u << 20).is_ok() && entry.size <= (1u << 20))
      ckpt::fuzz::invariant_broken("an accepted entry cannot be read");
  }
  return 0;
}
