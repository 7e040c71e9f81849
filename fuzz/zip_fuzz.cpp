// ZipArchive (formats/zip_archive.h) on arbitrary bytes, opened both ways (torch's methods, and
// stored-or-deflated as Keras archives are read), then every entry it accepted read. An accepted
// stored entry must be readable: open() bounds every entry by the file size. A deflated entry is
// inflated within bounds: it gives exactly the size the central directory records, or it is refused
// as corrupt (or not supported, past the size limit) naming the member; never more bytes, never a
// crash.
#include <cstddef>
#include <cstdint>

#include "formats/zip_archive.h"
#include "fuzz/fuzz_checks.h"

namespace {

void read_every_entry(const ckpt::ByteSource& source, ckpt::ZipMethods methods) {
  auto zip = ckpt::ZipArchive::open(source, methods);
  if (!zip.is_ok()) return;
  constexpr uint64_t kMax = 1u << 20;
  for (const auto& entry : zip->entries()) {
    if (zip->find(entry.name) == nullptr) ckpt::fuzz::invariant_broken("find() misses an entry");
    const auto read = zip->read(source, entry, kMax);
    if (entry.method != ckpt::kZipStored) {
      if (read.is_ok() && read->size() != entry.size)
        ckpt::fuzz::invariant_broken("an inflated entry is not the size its central directory records");
      if (!read.is_ok() && read.status().code() != ckpt::StatusCode::kCorruption &&
          read.status().code() != ckpt::StatusCode::kNotSupported &&
          read.status().code() != ckpt::StatusCode::kTruncated)
        ckpt::fuzz::invariant_broken("a compressed entry fails other than as corrupt or not supported");
    } else if (!read.is_ok() && entry.size <= kMax) {
      ckpt::fuzz::invariant_broken("an accepted stored entry cannot be read");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto source = ckpt::fuzz::memory_source(data, size);
  read_every_entry(*source, ckpt::ZipMethods::kTorch);
  read_every_entry(*source, ckpt::ZipMethods::kStoredOrDeflated);
  return 0;
}
