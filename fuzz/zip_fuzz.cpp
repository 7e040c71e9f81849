// ZipArchive (formats/zip_archive.h) on arbitrary bytes: open, then read every entry it accepted.
// An accepted stored entry must be readable: open() bounds every entry by the file size. The one
// compressed entry open() accepts, a deflated TorchScript code member (is_torchscript_code_member),
// is refused by read() as kNotSupported: only its CRC is checked, by inflating, never its text read.
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
    const auto read = zip->read(*source, entry, 1u << 20);
    if (entry.method != ckpt::kZipStored) {
      if (read.is_ok() || read.status().code() != ckpt::StatusCode::kNotSupported)
        ckpt::fuzz::invariant_broken("a compressed entry is not refused as not supported");
    } else if (!read.is_ok() && entry.size <= (1u << 20)) {
      ckpt::fuzz::invariant_broken("an accepted stored entry cannot be read");
    }
  }
  return 0;
}
