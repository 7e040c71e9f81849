// The subset of ZIP (PKWARE APPNOTE 6.3) that torch.save writes: stored (method 0) entries, no
// encryption, optionally ZIP64 end-of-central-directory records; and torch.jit.save's deflated
// (method 8) code members, whose CRC-32 is checked by inflating them with zlib (bounded by the size
// the central directory records); and, opened with ZipMethods::kStoredOrDeflated, any deflated member
// (a Keras `.keras` archive recompressed by a zip tool, which Keras's zipfile reads). Layout read here:
//   ... local file header "PK\3\4" + name + extra, then the entry's bytes ...
//   central directory: one "PK\1\2" record per entry (sizes, method, local header offset)
//   [ZIP64 end record "PK\6\6"] [ZIP64 locator "PK\6\7"] end record "PK\5\6" + comment (<= 64 KiB)
// Every count, size and offset is bounded by the file size before use. Bytes after the end record
// are corruption (named with their count); a file that starts like a zip but has no end record is
// truncated. Member CRC-32s (which torch.load never checks) are checked on request, by streaming.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/byte_source.h"
#include "base/crc32.h"
#include "base/status.h"

namespace ckpt {

constexpr uint64_t kZipMaxEntries = 1'000'000;
constexpr uint32_t kZipMaxNameBytes = 4096;

// Compression methods: torch.save stores every member; torch.jit.save deflates only its TorchScript
// source and debug members (`<archive>/code/...`, `*.debug_pkl`), never a pickle or a tensor payload.
constexpr uint16_t kZipStored = 0;
constexpr uint16_t kZipDeflated = 8;
// Whether `name` is a member torch.jit.save compresses: the only ones open() accepts deflated.
bool is_torchscript_code_member(const std::string& name);

// Which compression methods open() accepts. kTorch: what torch.save and torch.jit.save write (above),
// anything else refused, since torch.load's miniz would read a compressed data.pkl that no torch ever
// writes. kStoredOrDeflated: any member stored or deflated, as Python's zipfile (and so Keras's
// loader) reads them; the caller decides which archive it holds, then applies its writer's rule
// (require_torch_methods) where the archive is torch's.
enum class ZipMethods { kTorch, kStoredOrDeflated };

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // where the stored bytes start in the archive
  uint64_t size = 0;         // uncompressed
  uint16_t method = kZipStored;
  uint64_t compressed_size = 0;  // the bytes at data_offset: `size` unless deflated
  uint64_t stored_bytes() const { return method == kZipStored ? size : compressed_size; }
  uint32_t crc32 = 0;  // as the central directory records it
  // The rest as the central directory records it, for check_local_headers().
  uint64_t local_header = 0;  // offset of the entry's local header
  uint16_t version_needed = 0, flags = 0, mod_time = 0, mod_date = 0;
};

// The extra field PyTorch's zip writer (caffe2/serialize/inline_container.cc, getPadding) puts in
// every local header to align each member's data to 64 bytes: id "FB" (0x4246), then the padding,
// every byte 'Z'.
constexpr uint16_t kTorchPaddingExtraId = 0x4246;
constexpr uint8_t kTorchPaddingByte = 'Z';

// crc32_update (base/crc32.h): CRC-32 (ISO-HDLC, the zip/gzip polynomial), continued from `crc`.

class ZipArchive {
 public:
  // Parses the central directory and every local header. Compressed entries other than deflated
  // TorchScript code members (is_torchscript_code_member), and encrypted ones, are kNotSupported
  // naming the entry; anything out of bounds is kCorruption / kTruncated.
  static Result<ZipArchive> open(const ByteSource& source, ZipMethods methods = ZipMethods::kTorch);
  // kNotSupported naming the first member compressed in a way torch.save / torch.jit.save never
  // write: what open(kTorch) refuses, for an archive opened with kStoredOrDeflated.
  Status require_torch_methods(const std::string& file) const;

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // Reads an entry whole (a deflated one inflated), refusing entries larger than `max_bytes`.
  Result<std::string> read(const ByteSource& source, const ZipEntry& entry, uint64_t max_bytes) const;
  // Hands an entry's uncompressed bytes to `sink` in pieces of at most 64 KiB-1 MiB. A deflated
  // entry is inflated in bounded pieces: its stream must end exactly at its compressed size and give
  // exactly the size the central directory records (never more is produced), else kCorruption
  // naming the member. The CRC-32 is not checked here (check_crc32 does).
  using ByteSink = std::function<Status(const uint8_t* bytes, size_t length)>;
  Status stream(const ByteSource& source, const ZipEntry& entry, const ByteSink& sink) const;
  // Streams every member through CRC-32; the first mismatch is kCorruption naming the member, its
  // byte range and both values.
  Status check_crc32(const ByteSource& source) const;
  // check_crc32 of the members `which` selects, by name.
  Status check_crc32(const ByteSource& source, const std::function<bool(const std::string&)>& which) const;
  // Every member whose CRC-32 differs (or that cannot be read), as its byte range [begin, end) in
  // the archive: what a forensic report ties to the tensors stored there.
  std::vector<std::pair<uint64_t, uint64_t>> crc_mismatch_ranges(const ByteSource& source) const;
  // Checks every byte outside the members' data that the central directory does not already
  // depend on: the local headers, taken in file order, tile the archive from offset 0 to the
  // central directory with no gap or overlap (header, name, extra, data, data descriptor); each
  // local header repeats its central entry's version, flags, method, time, date and name; its CRC-32
  // and sizes (or, with flag bit 3, the data descriptor's) match; its extra fields parse, a ZIP64
  // field agrees with the sizes, PyTorch's "FB" padding is all 'Z', and no other id appears but
  // the NTFS/"UT"/"ux" records zip tools add (an unknown id is most likely a damaged "FB"). The first
  // disagreement is kCorruption naming the member, the offset, expected and found ("zip member 'a/data/0'
  // local header at 0x40: ..."). What stays unchecked: the central directory's own fields that no local
  // header repeats (version made by, attributes, comments) and the NTFS/"UT"/"ux" records' contents.
  Status check_local_headers(const ByteSource& source) const;

 private:
  std::vector<ZipEntry> entries_;
  // Entry indices sorted by name, the lower index first among equal names: find() is a binary
  // search. A scan per lookup made opening a torch.save file of 20,000 tensors quadratic (a
  // storage lookup each: 1.3 s of `convert`'s 2.9 s open at 320k chunks, issue 44).
  std::vector<uint32_t> by_name_;
  uint64_t directory_offset_ = 0;
};

}  // namespace ckpt
