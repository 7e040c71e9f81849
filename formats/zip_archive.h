// The subset of ZIP (PKWARE APPNOTE 6.3) that torch.save writes: stored (method 0) entries, no
// encryption, optionally ZIP64 end-of-central-directory records. Layout read here:
//   ... local file header "PK\3\4" + name + extra, then the entry's bytes ...
//   central directory: one "PK\1\2" record per entry (sizes, method, local header offset)
//   [ZIP64 end record "PK\6\6"] [ZIP64 locator "PK\6\7"] end record "PK\5\6" + comment (<= 64 KiB)
// Every count, size and offset is bounded by the file size before use. Bytes after the end record
// are corruption (named with their count); a file that starts like a zip but has no end record is
// truncated. Member CRC-32s (which torch.load never checks) are checked on request, by streaming.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "base/status.h"

namespace ckpt {

constexpr uint64_t kZipMaxEntries = 1'000'000;
constexpr uint32_t kZipMaxNameBytes = 4096;

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // where the stored bytes start in the archive
  uint64_t size = 0;
  uint32_t crc32 = 0;  // as the central directory records it
};

// CRC-32 (ISO-HDLC, the zip/gzip polynomial), continued from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t size);

class ZipArchive {
 public:
  // Parses the central directory and every local header. Compressed or encrypted entries are
  // kNotSupported naming the entry; anything out of bounds is kCorruption / kTruncated.
  static Result<ZipArchive> open(const ByteSource& source);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // Reads an entry whole, refusing entries larger than `max_bytes`.
  Result<std::string> read(const ByteSource& source, const ZipEntry& entry, uint64_t max_bytes) const;
  // Streams every member through CRC-32; the first mismatch is kCorruption naming the member, its
  // byte range and both values.
  Status check_crc32(const ByteSource& source) const;

 private:
  std::vector<ZipEntry> entries_;
};

}  // namespace ckpt
