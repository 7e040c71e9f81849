#include "formats/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>

#include "base/byte_coding.h"
#include "base/text.h"

namespace ckpt {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndBytes = 22, kZip64LocatorBytes = 20, kZip64EndBytes = 56;
constexpr size_t kCentralBytes = 46, kLocalBytes = 30;
constexpr size_t kMaxComment = 0xffff;

struct Directory {
  uint64_t entries, offset, size;
};

// A zip whose end record is missing but whose first bytes are a local header was cut short.
Status no_end_record(const ByteSource& src) {
  uint8_t head[4] = {};
  if (src.size() >= 4 && src.read_at(0, head, 4).is_ok() && decode_le(head, 4) == kLocalSig) {
    return Status::truncated(src.name() +
                             ": starts like a zip but has no end-of-central-directory record in " +
                             "its last 64 KiB (" + std::to_string(src.size()) + " bytes): truncated");
  }
  return Status::corruption(src.name() +
                            ": no zip end-of-central-directory record (not a zip, or truncated)");
}

// torch.load reads a zip through miniz, which takes the LAST end-record signature with 22 bytes
// after it, whatever its comment length says; Python's zipfile takes the last signature too; other
// readers take the first plausible one. Where those choices could differ, each reader would see its
// own central directory (and its own data.pkl), so a second end record is refused rather than
// picked: a signature after ours (inside its comment), or one before it whose central directory
// would parse. `chosen` is our record's index in `tail`, which starts at file offset `tail_at`.
Status refuse_other_end_records(const ByteSource& src, const std::vector<uint8_t>& tail, uint64_t chosen,
                                uint64_t tail_at) {
  const uint64_t size = src.size();
  for (uint64_t j = 0; j + 4 <= tail.size(); ++j) {
    if (j == chosen || decode_le(tail.data() + j, 4) != kEndSig) continue;
    bool plausible = j > chosen && j + kEndBytes <= tail.size();  // miniz would take this one
    if (!plausible && j < chosen && j + kEndBytes <= tail.size()) {
      const uint8_t* p = tail.data() + j;
      const uint64_t offset = decode_le(p + 16, 4), length = decode_le(p + 12, 4);
      uint8_t sig[4] = {};
      plausible = range_within(offset, length, size) &&
                  (length == 0 ||
                   (length >= 4 && src.read_at(offset, sig, 4).is_ok() && decode_le(sig, 4) == kCentralSig));
    }
    if (!plausible) continue;
    return Status::ambiguous(src.name() + " @" + hex_offset(tail_at + j) + ": a second zip end record (" +
                             "another at " + hex_offset(tail_at + chosen) +
                             "): zip readers disagree about which one holds the archive (torch.load's " +
                             "miniz takes the last), so each would read another directory; refused");
  }
  return Status::ok();
}

Result<Directory> find_directory(const ByteSource& src) {
  const std::string& file = src.name();
  const uint64_t size = src.size();
  if (size < kEndBytes) return no_end_record(src);
  const uint64_t tail_len = std::min<uint64_t>(size, kEndBytes + kMaxComment);
  std::vector<uint8_t> tail(tail_len);
  CKPT_RETURN_IF_ERROR(src.read_at(size - tail_len, tail.data(), tail_len));
  // Scan backwards: the end record is the last signature whose comment length reaches the end.
  std::optional<uint64_t> short_record;  // the last signature whose comment ends before the file does
  for (uint64_t i = tail_len - kEndBytes + 1; i-- > 0;) {
    const uint8_t* p = tail.data() + i;
    if (decode_le(p, 4) != kEndSig) continue;
    if (i + kEndBytes + decode_le(p + 20, 2) != tail_len) {
      if (!short_record && i + kEndBytes + decode_le(p + 20, 2) < tail_len) short_record = i;
      continue;
    }
    const uint64_t end_pos = size - tail_len + i;
    CKPT_RETURN_IF_ERROR(refuse_other_end_records(src, tail, i, size - tail_len));
    Directory d{decode_le(p + 10, 2), decode_le(p + 16, 4), decode_le(p + 12, 4)};
    const bool needs_zip64 = d.entries == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff;
    if (end_pos >= kZip64LocatorBytes) {
      uint8_t loc[kZip64LocatorBytes];
      CKPT_RETURN_IF_ERROR(src.read_at(end_pos - kZip64LocatorBytes, loc, sizeof loc));
      if (decode_le(loc, 4) == kZip64LocatorSig) {
        const uint64_t rec = decode_le(loc + 8, 8);
        if (!range_within(rec, kZip64EndBytes, size)) {
          return Status::corruption(file + " @" + hex_offset(end_pos - kZip64LocatorBytes) +
                                    ": ZIP64 end record offset " + hex_offset(rec) + " outside the file");
        }
        uint8_t z[kZip64EndBytes];
        CKPT_RETURN_IF_ERROR(src.read_at(rec, z, sizeof z));
        if (decode_le(z, 4) != kZip64EndSig) {
          return Status::corruption(file + " @" + hex_offset(rec) + ": bad ZIP64 end record signature");
        }
        d = Directory{decode_le(z + 32, 8), decode_le(z + 48, 8), decode_le(z + 40, 8)};
      } else if (needs_zip64) {
        return Status::corruption(file + " @" + hex_offset(end_pos) +
                                  ": end record needs ZIP64 but no locator");
      }
    }
    if (d.entries > kZipMaxEntries) {
      return Status::corruption(file + ": " + std::to_string(d.entries) + " entries exceeds the limit of " +
                                std::to_string(kZipMaxEntries));
    }
    if (!range_within(d.offset, d.size, size) || d.entries * kCentralBytes > d.size) {
      return Status::corruption(file + ": central directory at " + hex_offset(d.offset) + " (" +
                                std::to_string(d.size) + " bytes, " + std::to_string(d.entries) +
                                " entries) does not fit in the file (" + std::to_string(size) + " bytes)");
    }
    return d;
  }
  if (short_record) {
    const uint64_t end = *short_record + kEndBytes + decode_le(tail.data() + *short_record + 20, 2);
    return Status::corruption(file + " @" + hex_offset(size - tail_len + end) + ": " +
                              std::to_string(tail_len - end) + " bytes after the zip end record at " +
                              hex_offset(size - tail_len + *short_record) +
                              " (trailing garbage, or data appended to the file)");
  }
  return no_end_record(src);
}

// ZIP64 extended information (extra field 0x0001) replaces whichever fields were 0xffffffff.
Status apply_zip64_extra(const uint8_t* extra, size_t n, uint64_t* usize, uint64_t* csize, uint64_t* offset,
                         const std::string& where) {
  size_t pos = 0;
  while (pos + 4 <= n) {
    const uint64_t id = decode_le(extra + pos, 2), len = decode_le(extra + pos + 2, 2);
    if (pos + 4 + len > n) return Status::corruption(where + ": extra field overruns its record");
    if (id == 1) {
      size_t q = pos + 4;
      for (uint64_t* field : {usize, csize, offset}) {
        if (*field != 0xffffffff) continue;
        if (q + 8 > pos + 4 + len) return Status::corruption(where + ": ZIP64 extra field too short");
        *field = decode_le(extra + q, 8);
        q += 8;
      }
    }
    pos += 4 + len;
  }
  return Status::ok();
}

// miniz (torch.load's zip reader) looks members up ignoring ASCII case, by a binary search that may
// land on either of two names equal that way; Python's zipfile takes the last of two equal names.
// Two members whose names are equal ignoring case are therefore read differently by different
// loaders (data.pkl and DATA.PKL): refused, naming both. `order` is any permutation of the indices.
Status refuse_names_equal_ignoring_case(const std::string& file, const std::vector<ZipEntry>& entries,
                                        std::vector<uint32_t> order) {
  const auto lower = [](unsigned char c) {
    return static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  };
  const auto less = [&](uint32_t a, uint32_t b) {
    const std::string &x = entries[a].name, &y = entries[b].name;
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end(), [&](char p, char q) {
      return lower(static_cast<unsigned char>(p)) < lower(static_cast<unsigned char>(q));
    });
  };
  std::sort(order.begin(), order.end(), less);
  for (size_t k = 1; k < order.size(); ++k) {
    if (less(order[k - 1], order[k])) continue;
    const ZipEntry &a = entries[std::min(order[k - 1], order[k])],
                   &b = entries[std::max(order[k - 1], order[k])];
    return Status::ambiguous(file + ": zip members '" + a.name + "' and '" + b.name + "' " +
                             (a.name == b.name ? "have the same name" : "have the same name ignoring case") +
                             ": torch.load's miniz finds either one (its lookup ignores case) and "
                             "Python's zipfile the last; refused");
  }
  return Status::ok();
}

Status deflated_torch_member(const std::string& where) {
  return Status::not_supported(where +
                               ": compression method 8 (torch.save writes stored entries only; "
                               "torch.jit.save deflates only code/ and .debug_pkl members)");
}

}  // namespace

Result<ZipArchive> ZipArchive::open(const ByteSource& src, ZipMethods methods) {
  const std::string& file = src.name();
  CKPT_ASSIGN_OR_RETURN(Directory dir, find_directory(src));
  std::vector<uint8_t> cd(dir.size);
  CKPT_RETURN_IF_ERROR(src.read_at(dir.offset, cd.data(), cd.size()));
  ZipArchive zip;
  zip.directory_offset_ = dir.offset;
  zip.entries_.reserve(dir.entries);
  size_t pos = 0;
  uint32_t e_crc = 0;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    const std::string at = file + " @" + hex_offset(dir.offset + pos);
    if (pos + kCentralBytes > cd.size() || decode_le(cd.data() + pos, 4) != kCentralSig) {
      return Status::corruption(at + ": central directory entry " + std::to_string(i) + ": bad signature");
    }
    const uint8_t* p = cd.data() + pos;
    const uint64_t flags = decode_le(p + 8, 2), method = decode_le(p + 10, 2);
    uint64_t csize = decode_le(p + 20, 4), usize = decode_le(p + 24, 4), local = decode_le(p + 42, 4);
    e_crc = static_cast<uint32_t>(decode_le(p + 16, 4));
    const size_t name_len = decode_le(p + 28, 2), extra_len = decode_le(p + 30, 2),
                 comment_len = decode_le(p + 32, 2);
    if (pos + kCentralBytes + name_len + extra_len + comment_len > cd.size()) {
      return Status::corruption(at + ": central directory entry " + std::to_string(i) +
                                " overruns the directory");
    }
    ZipEntry e;
    e.crc32 = e_crc;
    e.version_needed = static_cast<uint16_t>(decode_le(p + 6, 2));
    e.flags = static_cast<uint16_t>(flags);
    e.mod_time = static_cast<uint16_t>(decode_le(p + 12, 2));
    e.mod_date = static_cast<uint16_t>(decode_le(p + 14, 2));
    e.name.assign(reinterpret_cast<const char*>(p + kCentralBytes), name_len);
    const std::string where = file + ": entry '" + e.name + "'";
    CKPT_RETURN_IF_ERROR(
        apply_zip64_extra(p + kCentralBytes + name_len, extra_len, &usize, &csize, &local, where));
    if (method != kZipStored && method != kZipDeflated) {
      return Status::not_supported(where + ": compression method " + std::to_string(method) +
                                   " (only stored (0) and deflated (8) members are read)");
    }
    if (methods == ZipMethods::kTorch && method == kZipDeflated && !is_torchscript_code_member(e.name))
      return deflated_torch_member(where);
    if (flags & 1) return Status::not_supported(where + ": encrypted");
    e.method = static_cast<uint16_t>(method);
    e.compressed_size = csize;
    if (method == kZipStored && csize != usize) {
      return Status::corruption(where + ": stored entry has compressed size " + std::to_string(csize) +
                                " != size " + std::to_string(usize));
    }
    if (!range_within(local, kLocalBytes, src.size())) {
      return Status::corruption(where + ": local header offset " + hex_offset(local) + " outside the file");
    }
    uint8_t lh[kLocalBytes];
    CKPT_RETURN_IF_ERROR(src.read_at(local, lh, sizeof lh));
    if (decode_le(lh, 4) != kLocalSig) {
      return Status::corruption(where + " @" + hex_offset(local) + ": bad local header signature");
    }
    e.local_header = local;
    e.data_offset = local + kLocalBytes + decode_le(lh + 26, 2) + decode_le(lh + 28, 2);
    e.size = usize;
    if (!range_within(e.data_offset, e.stored_bytes(), src.size())) {
      return Status::truncated(where + ": " + std::to_string(e.stored_bytes()) + " bytes at " +
                               hex_offset(e.data_offset) + " run past the end of the file (" +
                               std::to_string(src.size()) + " bytes)");
    }
    zip.entries_.push_back(std::move(e));
    pos += kCentralBytes + name_len + extra_len + comment_len;
  }
  zip.by_name_.resize(zip.entries_.size());
  for (size_t i = 0; i < zip.by_name_.size(); ++i) zip.by_name_[i] = static_cast<uint32_t>(i);
  CKPT_RETURN_IF_ERROR(refuse_names_equal_ignoring_case(file, zip.entries_, zip.by_name_));
  std::stable_sort(zip.by_name_.begin(), zip.by_name_.end(),
                   [&](uint32_t a, uint32_t b) { return zip.entries_[a].name < zip.entries_[b].name; });
  return zip;
}

Status ZipArchive::require_torch_methods(const std::string& file) const {
  for (const ZipEntry& e : entries_) {
    if (e.method == kZipDeflated && !is_torchscript_code_member(e.name))
      return deflated_torch_member(file + ": entry '" + e.name + "'");
  }
  return Status::ok();
}

namespace {

// A local header field that disagrees with the central directory's copy.
Status field_mismatch(const std::string& at, const char* field, uint64_t local, uint64_t central) {
  char values[96];
  std::snprintf(values, sizeof values, "0x%llx, central directory says 0x%llx",
                static_cast<unsigned long long>(local), static_cast<unsigned long long>(central));
  return Status::corruption(at + ": " + field + " is " + values);
}

// The local header's fields that must repeat the central directory's (method 0: stored).
Status check_repeated_fields(const uint8_t* lh, const ZipEntry& e, const std::string& at) {
  const struct {
    const char* field;
    size_t at;
    uint64_t central;
  } same[] = {{"version needed", 4, e.version_needed},
              {"flags", 6, e.flags},
              {"method", 8, e.method},
              {"modification time", 10, e.mod_time},
              {"modification date", 12, e.mod_date}};
  for (const auto& f : same) {
    if (decode_le(lh + f.at, 2) != f.central)
      return field_mismatch(at, f.field, decode_le(lh + f.at, 2), f.central);
  }
  return Status::ok();
}

// The local extra field: records that exactly fill it; ZIP64 sizes (which replace *csize and
// *usize where those are 0xffffffff); PyTorch's padding, every byte of it 'Z'. An unknown id is
// refused: it is more likely a damaged "FB" than a real record, whose padding would then go
// unchecked.
Status check_local_extra(const uint8_t* extra, size_t extra_len, uint64_t extra_offset, const std::string& at,
                         uint64_t* csize, uint64_t* usize) {
  for (size_t pos = 0; pos < extra_len;) {
    if (pos + 4 > extra_len || pos + 4 + decode_le(extra + pos + 2, 2) > extra_len) {
      return Status::corruption(at + ": extra field record at byte " + std::to_string(pos) + " of " +
                                std::to_string(extra_len) + " overruns the extra field");
    }
    const uint64_t id = decode_le(extra + pos, 2), len = decode_le(extra + pos + 2, 2);
    const uint8_t* data = extra + pos + 4;
    if (id == kTorchPaddingExtraId) {
      for (size_t i = 0; i < len; ++i) {
        if (data[i] != kTorchPaddingByte) {
          char found[48];
          std::snprintf(found, sizeof found, "0x%02x, expected 0x%02x ('Z')", data[i], kTorchPaddingByte);
          return Status::corruption(at + ": PyTorch alignment padding byte " + std::to_string(i) + " (at " +
                                    hex_offset(extra_offset + pos + 4 + i) + ") is " + found);
        }
      }
    } else if (id == 1) {
      size_t q = 0;
      for (uint64_t* field : {usize, csize}) {
        if (*field != 0xffffffff) continue;
        if (q + 8 > len) return Status::corruption(at + ": ZIP64 extra field too short");
        *field = decode_le(data + q, 8);
        q += 8;
      }
    } else if (id != 0x000a && id != 0x5455 && id != 0x7875) {
      // Beyond PyTorch's two, the timestamps/ids zip tools add (NTFS, "UT", "ux") are allowed.
      char found[48];
      std::snprintf(found, sizeof found, "0x%04llx", static_cast<unsigned long long>(id));
      return Status::corruption(at + ": unknown extra field id " + found + " at byte " + std::to_string(pos) +
                                " (PyTorch writes only 0x4246 'FB' padding and 0x0001 ZIP64)");
    }
    pos += 4 + len;
  }
  return Status::ok();
}

// With flag bit 3 the header's CRC-32 and sizes may be zero (what torch writes); any other value
// must be the true one. The descriptor after the data holds them: optional signature, CRC-32, then
// 4- or 8-byte sizes. Returns where the member's record (data and descriptor) ends.
Result<uint64_t> check_data_descriptor(const ByteSource& src, const ZipEntry& e, const std::string& at,
                                       uint64_t crc, uint64_t csize, uint64_t usize) {
  constexpr uint32_t kDescriptorSig = 0x08074b50;
  const auto sizes_agree = [&](uint64_t c, uint64_t u) { return c == e.stored_bytes() && u == e.size; };
  const uint64_t end = e.data_offset + e.stored_bytes();
  if (crc != 0 && crc != e.crc32) return field_mismatch(at, "CRC-32", crc, e.crc32);
  if (csize != 0 && csize != 0xffffffff && csize != e.stored_bytes())
    return field_mismatch(at, "compressed size", csize, e.stored_bytes());
  if (usize != 0 && usize != 0xffffffff && usize != e.size) return field_mismatch(at, "size", usize, e.size);
  uint8_t d[24] = {};
  const uint64_t avail = std::min<uint64_t>(sizeof d, src.size() - std::min(src.size(), end));
  CKPT_RETURN_IF_ERROR(src.read_at(end, d, static_cast<size_t>(avail)));
  const size_t sig = avail >= 4 && decode_le(d, 4) == kDescriptorSig ? 4 : 0;
  if (avail < sig + 12) {
    return Status::truncated(at + ": its data descriptor at " + hex_offset(end) + " runs past the end (" +
                             std::to_string(src.size()) + " bytes)");
  }
  if (decode_le(d + sig, 4) != e.crc32)
    return field_mismatch(at, "data descriptor CRC-32", decode_le(d + sig, 4), e.crc32);
  if (sizes_agree(decode_le(d + sig + 4, 4), decode_le(d + sig + 8, 4))) return end + sig + 12;
  if (avail >= sig + 20 && sizes_agree(decode_le(d + sig + 4, 8), decode_le(d + sig + 12, 8)))
    return end + sig + 20;
  return field_mismatch(at, "data descriptor size", decode_le(d + sig + 4, 4), e.size);
}

// One member's local header against its central directory entry. open() checked that the header,
// name, extra and data lie inside the source. Returns where the member's record ends.
Result<uint64_t> check_local_header(const ByteSource& src, const ZipEntry& e) {
  const std::string at =
      src.name() + ": zip member '" + e.name + "' local header at " + hex_offset(e.local_header);
  uint8_t lh[kLocalBytes];
  CKPT_RETURN_IF_ERROR(src.read_at(e.local_header, lh, sizeof lh));
  CKPT_RETURN_IF_ERROR(check_repeated_fields(lh, e, at));
  const size_t name_len = decode_le(lh + 26, 2), extra_len = decode_le(lh + 28, 2);
  std::vector<uint8_t> name_extra(name_len + extra_len);
  CKPT_RETURN_IF_ERROR(src.read_at(e.local_header + kLocalBytes, name_extra.data(), name_extra.size()));
  if (std::string(name_extra.begin(), name_extra.begin() + name_len) != e.name) {
    return Status::corruption(
        at + ": name is '" +
        std::string(name_extra.begin(), name_extra.begin() + std::min<size_t>(name_len, 256)) +
        "', central directory says '" + e.name + "'");
  }
  uint64_t crc = decode_le(lh + 14, 4), csize = decode_le(lh + 18, 4), usize = decode_le(lh + 22, 4);
  CKPT_RETURN_IF_ERROR(check_local_extra(name_extra.data() + name_len, extra_len,
                                         e.local_header + kLocalBytes + name_len, at, &csize, &usize));
  if (e.flags & 8) return check_data_descriptor(src, e, at, crc, csize, usize);
  if (crc != e.crc32) return field_mismatch(at, "CRC-32", crc, e.crc32);
  if (csize != e.stored_bytes()) return field_mismatch(at, "compressed size", csize, e.stored_bytes());
  if (usize != e.size) return field_mismatch(at, "size", usize, e.size);
  return e.data_offset + e.stored_bytes();
}

}  // namespace

// The members' records must tile the bytes before the central directory: every byte belongs to
// exactly one member, so nothing can hide between them.
Status ZipArchive::check_local_headers(const ByteSource& src) const {
  std::vector<const ZipEntry*> order;
  for (const ZipEntry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->local_header < b->local_header; });
  uint64_t expected = 0;  // where the next local header must start
  for (const ZipEntry* e : order) {
    if (e->local_header != expected) {
      const std::string at =
          src.name() + ": zip member '" + e->name + "' local header at " + hex_offset(e->local_header);
      return Status::corruption(
          e->local_header > expected
              ? src.name() + ": " + std::to_string(e->local_header - expected) + " bytes at " +
                    hex_offset(expected) + " belong to no zip member (before member '" + e->name + "')"
              : at + ": overlaps the previous member's record, which ends at " + hex_offset(expected));
    }
    CKPT_ASSIGN_OR_RETURN(expected, check_local_header(src, *e));
  }
  if (expected != directory_offset_) {
    return Status::corruption(
        expected < directory_offset_
            ? src.name() + ": " + std::to_string(directory_offset_ - expected) + " bytes at " +
                  hex_offset(expected) +
                  " between the last zip member and the central directory belong to no member"
            : src.name() + ": the last zip member's record ends at " + hex_offset(expected) +
                  ", past the central directory at " + hex_offset(directory_offset_));
  }
  return Status::ok();
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  const auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                                   [&](uint32_t i, const std::string& n) { return entries_[i].name < n; });
  return it != by_name_.end() && entries_[*it].name == name ? &entries_[*it] : nullptr;
}

Result<std::string> ZipArchive::read(const ByteSource& src, const ZipEntry& entry, uint64_t max_bytes) const {
  if (entry.size > max_bytes) {
    return Status::not_supported(src.name() + ": entry '" + entry.name + "' has " +
                                 std::to_string(entry.size) + " bytes, more than the limit of " +
                                 std::to_string(max_bytes));
  }
  std::string out(entry.size, '\0');
  if (entry.method == kZipStored) {
    CKPT_RETURN_IF_ERROR(src.read_at(entry.data_offset, out.data(), out.size()));
    return out;
  }
  size_t at = 0;
  CKPT_RETURN_IF_ERROR(stream(src, entry, [&](const uint8_t* bytes, size_t n) {
    std::copy(bytes, bytes + n, out.begin() + static_cast<std::ptrdiff_t>(at));
    at += n;
    return Status::ok();
  }));
  return out;
}

}  // namespace ckpt

namespace ckpt {

namespace {

// A deflated member's uncompressed bytes, inflated in bounded pieces into `sink`: the stream must
// end exactly at its compressed size and produce exactly the size the central directory records
// (nothing past that size reaches the sink, so a member that inflates to more is no bomb here).
Status inflate_member(const ByteSource& src, const ZipEntry& e, const ZipArchive::ByteSink& sink) {
  constexpr size_t kPiece = 64 << 10;
  const std::string at = src.name() + ": zip member '" + e.name + "' (deflated, " +
                         std::to_string(e.compressed_size) + " bytes at " + hex_offset(e.data_offset) + ")";
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return Status::io_error(at + ": zlib cannot start inflating");
  std::vector<uint8_t> in(kPiece), out(kPiece);
  uint64_t read = 0, produced = 0;
  int rc = Z_OK;
  Status sunk = Status::ok();
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0 && read < e.compressed_size) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, e.compressed_size - read));
      const Status st = src.read_at(e.data_offset + read, in.data(), n);
      if (!st.is_ok()) {
        inflateEnd(&z);
        return st;
      }
      read += n;
      z.next_in = in.data();
      z.avail_in = static_cast<uInt>(n);
    }
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&z, Z_NO_FLUSH);
    const size_t n = out.size() - z.avail_out;
    produced += n;
    if (produced > e.size) break;
    sunk = sink(out.data(), n);
    if (!sunk.is_ok()) break;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_in == 0 && read < e.compressed_size)) break;
    if (z.avail_in == 0 && read == e.compressed_size && n == 0) break;  // the stream stops short
  }
  const bool whole = rc == Z_STREAM_END && z.avail_in == 0 && read == e.compressed_size;
  inflateEnd(&z);
  if (!sunk.is_ok()) return sunk;
  if (!whole || produced != e.size) {
    return Status::corruption(at + ": the deflate stream is damaged (inflated " + std::to_string(produced) +
                              " bytes, the directory records " + std::to_string(e.size) + ")");
  }
  return Status::ok();
}

// The CRC-32 of a deflated member's uncompressed bytes.
Result<uint32_t> inflated_crc32(const ByteSource& src, const ZipEntry& e) {
  uint32_t crc = 0;
  CKPT_RETURN_IF_ERROR(inflate_member(src, e, [&](const uint8_t* bytes, size_t n) {
    crc = crc32_update(crc, bytes, n);
    return Status::ok();
  }));
  return crc;
}

}  // namespace

bool is_torchscript_code_member(const std::string& name) {
  return name.find("/code/") != std::string::npos || ends_with(name, ".debug_pkl");
}

namespace {

// The CRC-32 of a member's (uncompressed) bytes, streamed.
Result<uint32_t> member_crc32(const ByteSource& src, const ZipEntry& e, std::vector<uint8_t>& buffer) {
  constexpr uint64_t kBuffer = 256 << 10;  // stays in L2 between the read's copy and the CRC
  if (e.method == kZipDeflated) return inflated_crc32(src, e);
  uint32_t crc = 0;
  buffer.resize(static_cast<size_t>(std::min<uint64_t>(e.size, kBuffer)));
  for (uint64_t done = 0; done < e.size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(e.size - done, buffer.size()));
    CKPT_RETURN_IF_ERROR(src.read_at(e.data_offset + done, buffer.data(), n));
    crc = crc32_update(crc, buffer.data(), n);
    done += n;
  }
  return crc;
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> ZipArchive::crc_mismatch_ranges(const ByteSource& src) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  std::vector<uint8_t> buffer;
  for (const ZipEntry& e : entries_) {
    const Result<uint32_t> crc = member_crc32(src, e, buffer);
    if (!crc.is_ok() || *crc != e.crc32) out.emplace_back(e.data_offset, e.data_offset + e.stored_bytes());
  }
  return out;
}

Status ZipArchive::check_crc32(const ByteSource& src) const {
  return check_crc32(src, [](const std::string&) { return true; });
}

Status ZipArchive::check_crc32(const ByteSource& src,
                               const std::function<bool(const std::string&)>& which) const {
  std::vector<uint8_t> buffer;
  for (const ZipEntry& e : entries_) {
    if (!which(e.name)) continue;
    CKPT_ASSIGN_OR_RETURN(const uint32_t crc, member_crc32(src, e, buffer));
    if (crc != e.crc32) {
      char values[64];
      std::snprintf(values, sizeof values, "stored 0x%08x, computed 0x%08x", e.crc32, crc);
      return Status::corruption(src.name() + ": zip member '" + e.name + "' (" + std::to_string(e.size) +
                                " bytes at " + hex_offset(e.data_offset) + "): CRC-32 mismatch: " + values +
                                " (a byte in this member changed after it was written)");
    }
  }
  return Status::ok();
}

Status ZipArchive::stream(const ByteSource& src, const ZipEntry& e, const ByteSink& sink) const {
  if (e.method == kZipDeflated) return inflate_member(src, e, sink);
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min<uint64_t>(e.size, 1 << 20)));
  for (uint64_t done = 0; done < e.size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(e.size - done, buffer.size()));
    CKPT_RETURN_IF_ERROR(src.read_at(e.data_offset + done, buffer.data(), n));
    CKPT_RETURN_IF_ERROR(sink(buffer.data(), n));
    done += n;
  }
  return Status::ok();
}

}  // namespace ckpt
