#include "formats/native_shard.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

#include "base/byte_coding.h"
#include "base/file_io.h"
#include "base/huge_pages.h"
#include "base/json_fields.h"
#include "base/json_text_writer.h"
#include "base/sha256.h"
#include "base/streaming_file_writer.h"
#include "formats/native_header_fast_parse.h"
#include "formats/native_shard_format.h"

namespace ckpt {

namespace {

NativeChunkFields fields_of(const ChunkInfo& c) {
  return {c.name,  c.component,   c.dtype,      c.global_shape, c.offsets,
          c.shape, c.data_offset, c.data_bytes, c.sha256};
}

void append_json_string(std::string& out, std::string_view s) {
  if (!is_plain_json_string(s.data(), s.size())) {
    out += nlohmann::json(std::string(s)).dump();  // throws on invalid UTF-8, as the writer always has
    return;
  }
  out += '"';
  out.append(s);
  out += '"';
}

template <typename Int>
void append_number(std::string& out, Int v) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  out.append(buf, static_cast<size_t>(end - buf));
}

void append_dims(std::string& out, DimsView d) {
  out += '[';
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) out += ',';
    append_number(out, d[i]);
  }
  out += ']';
}

// One entry of the header's chunk list as nlohmann's compact dump() writes ChunkInfo::to_json()
// (keys sorted), appended to `out`: the one layout the writer writes and the comparison reads.
void append_chunk_entry(std::string& out, const NativeChunkFields& c, bool first) {
  out += first ? "{\"component\":" : ",{\"component\":";
  append_json_string(out, c.component);
  out += ",\"data_bytes\":";
  append_number(out, c.data_bytes);
  out += ",\"data_offset\":";
  append_number(out, c.data_offset);
  out += ",\"dtype\":";
  append_json_string(out, dtype_name(c.dtype));
  out += ",\"global_shape\":";
  append_dims(out, c.global_shape);
  out += ",\"name\":";
  append_json_string(out, c.name);
  out += ",\"offsets\":";
  append_dims(out, c.offsets);
  out += ",\"sha256\":";
  append_json_string(out, c.sha256);
  out += ",\"shape\":";
  append_dims(out, c.shape);
  out += '}';
}

// The header around its entries: before them, and after them up to the metadata object.
constexpr std::string_view kHeaderHead = "{\"chunks\":[";
const std::string& header_up_to_metadata() {
  static const std::string text = std::string("],\"format\":\"") + kNativeHeaderFormat + "\",\"metadata\":";
  return text;
}

// Serialises the header for payloads laid out from `payload_start` into `text`, filling
// data_offset. The header text, compact with sorted keys (what nlohmann's dump() of the same object
// gives), written field by field: building the object first took most of a save of 20,000 chunks a
// shard, and a save lays the header out two or three times (issue 44). `text` is rewritten in
// place: each layout is as long as the last or nearly, so after the first its bytes are not
// allocated again (a 5 MB header grown by doubling each time was most of a save's page faults).
void layout_header(std::vector<ChunkInfo>& chunks, const nlohmann::json& metadata, uint64_t payload_start,
                   std::string& text) {
  uint64_t offset = payload_start;
  text.assign(kHeaderHead);
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkInfo& c = chunks[i];
    const uint64_t alignment =
        c.data_bytes >= kPageAlignedPayloadMinBytes ? kPagePayloadAlignment : kPayloadAlignment;
    c.data_offset = align_up(offset, alignment);
    offset = c.data_offset + c.data_bytes;
    append_chunk_entry(text, fields_of(c), i == 0);
  }
  text += header_up_to_metadata();
  text += metadata.dump();
  text += '}';
}

std::array<uint8_t, kNativePreambleBytes> make_preamble(const std::string& header) {
  std::array<uint8_t, kNativePreambleBytes> preamble{};
  std::memcpy(preamble.data(), kNativeShardMagic, sizeof(kNativeShardMagic));
  encode_le32(preamble.data() + 8, kNativeShardVersion);
  encode_le32(preamble.data() + 12, 0);
  encode_le64(preamble.data() + 16, header.size());
  Sha256 header_hash;
  header_hash.update(header.data(), header.size());
  const Sha256Digest header_digest = header_hash.finish();
  std::memcpy(preamble.data() + 24, header_digest.data(), header_digest.size());
  return preamble;
}

}  // namespace

bool looks_like_native_shard(const uint8_t* head, size_t size) {
  return size >= sizeof(kNativeShardMagic) &&
         std::memcmp(head, kNativeShardMagic, sizeof(kNativeShardMagic)) == 0;
}

Result<WrittenFile> write_native_shard(const std::string& path, const std::vector<ChunkPayload>& payloads,
                                       const nlohmann::json& metadata) {
  // Every SHA-256 is 64 hex digits, so the header laid out with placeholders has the length and
  // payload offsets of the final one: payloads stream out while they are hashed, and the header
  // (held in memory by the writer) is filled in last.
  const std::string kPlaceholderSha(64, '0');
  std::vector<ChunkInfo> chunks;
  chunks.reserve(payloads.size());
  for (const auto& p : payloads) {
    ChunkInfo c = p.info;
    auto nbytes = checked_nbytes(c.shape, c.dtype);
    if (!nbytes) return Status::invalid_argument(path + ": chunk " + c.label() + " has an invalid shape");
    c.data_bytes = *nbytes;
    c.sha256 = kPlaceholderSha;
    chunks.push_back(std::move(c));
  }
  // The header holds the payload offsets and the offsets depend on the header's length: grow the
  // reserved space until the serialised header fits (converges in one or two rounds).
  uint64_t payload_start = align_up(kNativePreambleBytes + 256, kPayloadAlignment);
  std::string header;
  size_t estimate = 4096;  // the header's length, about: one allocation, not a string grown by doubling
  for (const ChunkInfo& c : chunks) estimate += c.name.size() + 256;
  header.reserve(estimate);
  for (;;) {
    layout_header(chunks, metadata, payload_start, header);
    const uint64_t needed = align_up(kNativePreambleBytes + header.size(), kPayloadAlignment);
    if (needed <= payload_start) break;
    payload_start = needed;
  }
  if (header.size() > kMaxHeaderBytes) {
    return Status::invalid_argument(path + ": header of " + std::to_string(header.size()) +
                                    " bytes exceeds the format limit; use more shards");
  }

  StreamingFileWriter::Options options;
  options.held_prefix_bytes = payload_start;
  CKPT_ASSIGN_OR_RETURN(auto file, StreamingFileWriter::create_exclusive(path, options));
  CKPT_RETURN_IF_ERROR(file->append_zeros(static_cast<size_t>(payload_start)));
  for (size_t i = 0; i < chunks.size(); ++i) {
    CKPT_RETURN_IF_ERROR(
        file->append_zeros(static_cast<size_t>(chunks[i].data_offset - file->bytes_appended())));
    Sha256 sha;
    CKPT_RETURN_IF_ERROR(append_payload(*file, payloads[i], chunks[i].data_bytes, &sha));
    chunks[i].sha256 = sha.finish_hex();
  }

  const uint64_t placeholder_length = header.size();
  layout_header(chunks, metadata, payload_start, header);
  if (header.size() != placeholder_length) {
    return Status::invalid_argument(path + ": header length changed from " +
                                    std::to_string(placeholder_length) + " to " +
                                    std::to_string(header.size()) + " once hashes were filled in");
  }
  header.resize(payload_start - kNativePreambleBytes, ' ');
  const auto preamble = make_preamble(header);
  CKPT_RETURN_IF_ERROR(file->patch_prefix(0, preamble.data(), preamble.size()));
  CKPT_RETURN_IF_ERROR(file->patch_prefix(kNativePreambleBytes, header.data(), header.size()));

  Sha256 digest;
  digest.update(preamble.data(), preamble.size());
  digest.update(header.data(), header.size());
  WrittenFile written;
  written.path = path;
  written.bytes = file->bytes_appended();
  CKPT_RETURN_IF_ERROR(file->finish());
  written.sha256 = digest.finish_hex();
  written.sha256_of = "header";
  written.chunks = std::move(chunks);
  return written;
}

namespace {

// A payload's place in the file, and which chunk it is.
struct PayloadPlace {
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
  size_t chunk = 0;
};

enum class LayoutFault { kNone, kUnaligned, kOverlaps, kOverflows, kPastEnd, kBytesAfter };

struct LayoutCheck {
  LayoutFault fault = LayoutFault::kNone;
  size_t chunk = 0;  // the payload at fault (kUnaligned, kOverlaps, kOverflows)
  uint64_t end = 0;  // where the payloads before it (or all of them) end
};

// The first thing wrong with where the payloads lie, in offset order: each aligned, after the
// header and the payload before it, without overflow, the last inside the file and followed by
// nothing but padding.
LayoutCheck find_layout_fault(std::vector<PayloadPlace> places, uint64_t payload_start, uint64_t file_size) {
  std::sort(places.begin(), places.end(),
            [](const PayloadPlace& a, const PayloadPlace& b) { return a.data_offset < b.data_offset; });
  uint64_t end = payload_start;
  for (const PayloadPlace& p : places) {
    if (p.data_offset % kPayloadAlignment != 0) return {LayoutFault::kUnaligned, p.chunk, end};
    if (p.data_offset < end) return {LayoutFault::kOverlaps, p.chunk, end};
    if (p.data_bytes > UINT64_MAX - p.data_offset) return {LayoutFault::kOverflows, p.chunk, end};
    end = p.data_offset + p.data_bytes;
  }
  if (end > file_size) return {LayoutFault::kPastEnd, 0, end};
  if (align_up(end, kPayloadAlignment) < file_size) return {LayoutFault::kBytesAfter, 0, end};
  return {LayoutFault::kNone, 0, end};
}

Status check_payload_layout(const std::vector<ChunkInfo>& chunks, uint64_t payload_start, uint64_t file_size,
                            const std::string& where) {
  std::vector<PayloadPlace> places;
  places.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i)
    places.push_back({chunks[i].data_offset, chunks[i].data_bytes, i});
  const LayoutCheck check = find_layout_fault(std::move(places), payload_start, file_size);
  // The chunk at fault, for the faults that have one.
  auto chunk_at = [&]() -> const ChunkInfo& { return chunks[check.chunk]; };
  switch (check.fault) {
    case LayoutFault::kNone: return Status::ok();
    case LayoutFault::kUnaligned:
      return Status::corruption(where + " @" + std::to_string(chunk_at().data_offset) + ": payload of " +
                                chunk_at().label() + " is not " + std::to_string(kPayloadAlignment) +
                                "-byte aligned");
    case LayoutFault::kOverlaps:
      return Status::corruption(
          where + " @" + std::to_string(chunk_at().data_offset) + ": payload of " + chunk_at().label() +
          " overlaps the header or a previous payload (which ends at " + std::to_string(check.end) + ")");
    case LayoutFault::kOverflows:
      return Status::corruption(where + ": payload range of " + chunk_at().label() + " overflows");
    case LayoutFault::kPastEnd:
      return Status::truncated(where + ": file has " + std::to_string(file_size) +
                               " bytes but its header places payloads up to byte " +
                               std::to_string(check.end) + " (torn write?)");
    case LayoutFault::kBytesAfter:
      return Status::corruption(where + ": " + std::to_string(file_size - check.end) +
                                " unexpected bytes after the last payload (at " + std::to_string(check.end) +
                                ")");
  }
  return Status::ok();
}

// Reads and checks the preamble (magic, version, flags, a header length in bounds and inside the
// file): the header's length, or what is wrong, named at its offset.
Result<uint64_t> read_preamble(const ByteSource& source, uint8_t (&preamble)[kNativePreambleBytes]) {
  const std::string& where = source.name();
  if (source.size() < kNativePreambleBytes) {
    return Status::truncated(where + ": " + std::to_string(source.size()) + " bytes is shorter than the " +
                             std::to_string(kNativePreambleBytes) + "-byte preamble");
  }
  CKPT_RETURN_IF_ERROR(source.read_at(0, preamble, kNativePreambleBytes));
  if (!looks_like_native_shard(preamble, kNativePreambleBytes)) {
    return Status::corruption(where + " @0: bad magic " + to_hex(preamble, 8) + ", expected " +
                              to_hex(reinterpret_cast<const uint8_t*>(kNativeShardMagic), 8));
  }
  const uint32_t version = decode_le32(preamble + 8);
  if (version != kNativeShardVersion) {
    return Status::not_supported(where + " @8: format version " + std::to_string(version) +
                                 ", this build reads " + std::to_string(kNativeShardVersion));
  }
  if (decode_le32(preamble + 12) != 0) return Status::not_supported(where + " @12: unknown flags set");
  const uint64_t header_len = decode_le64(preamble + 16);
  if (header_len == 0 || header_len > kMaxHeaderBytes) {
    return Status::corruption(where + " @16: header length " + std::to_string(header_len) + " outside (0, " +
                              std::to_string(kMaxHeaderBytes) + "]");
  }
  if (header_len > source.size() - kNativePreambleBytes) {
    return Status::truncated(where + " @16: header length " + std::to_string(header_len) +
                             " runs past the end of the " + std::to_string(source.size()) + "-byte file");
  }
  return header_len;
}

// A native header read front to back in blocks, each hashed as it is read, and compared with the
// text a caller lays out: one block in memory whatever the header's length (a whole 5 MB header
// a shard was a fresh mapping, a page fault every 4 KiB).
class HeaderStream {
 public:
  HeaderStream(const ByteSource& source, uint64_t length) : source_(source), left_(length) {
    block_.resize(kStreamBlockBytes);
  }
  // Whether the header continues with `text`; consumes it.
  bool next_is(std::string_view text) {
    while (!text.empty()) {
      if (at_ == filled_ && !refill()) return false;
      const size_t n = std::min(text.size(), filled_ - at_);
      if (std::memcmp(block_.data() + at_, text.data(), n) != 0) return false;
      at_ += n;
      text.remove_prefix(n);
    }
    return true;
  }
  // The rest of the header; nullopt where it cannot be read.
  std::optional<std::string> rest() {
    std::string out(block_.data() + at_, filled_ - at_);
    at_ = filled_;
    while (left_ > 0) {
      if (!refill()) return std::nullopt;
      out.append(block_.data(), filled_);
      at_ = filled_;
    }
    return out;
  }
  // Once the whole header was read: its SHA-256.
  Sha256Digest digest() { return hash_.finish(); }

 private:
  bool refill() {
    if (left_ == 0) return false;
    filled_ = static_cast<size_t>(std::min<uint64_t>(left_, block_.size()));
    if (!source_.read_at(offset_, block_.data(), filled_).is_ok()) {
      left_ = 0;
      return false;
    }
    hash_.update(block_.data(), filled_);
    offset_ += filled_;
    left_ -= filled_;
    at_ = 0;
    return true;
  }

  const ByteSource& source_;
  uint64_t offset_ = kNativePreambleBytes;
  uint64_t left_;  // header bytes not yet read
  std::vector<char> block_;
  size_t filled_ = 0;
  size_t at_ = 0;
  Sha256 hash_;
};

}  // namespace

// What open_native_shard makes of a header read and checked against its own digest.
Result<std::unique_ptr<NativeShardFile>> open_header_read(std::unique_ptr<ByteSource> source,
                                                          const std::string& header, uint64_t header_len) {
  const std::string where = source->name();
  auto file = std::unique_ptr<NativeShardFile>(new NativeShardFile());
  file->header_bytes_ = header_len;
  // simdjson for a header laid out as the writer lays it out; nlohmann (the reference, with its
  // errors) for any other (formats/native_header_fast_parse.h).
  if (std::optional<NativeHeaderFields> fast = parse_native_header_fast(header, kMaxChunksPerShard)) {
    file->metadata_ = std::move(fast->metadata);
    file->chunks_ = std::move(fast->chunks);
    CKPT_RETURN_IF_ERROR(
        check_payload_layout(file->chunks_, kNativePreambleBytes + header_len, source->size(), where));
    file->source_ = std::move(source);
    return file;
  }
  CKPT_ASSIGN_OR_RETURN(auto json, parse_json(header, where + " header"));
  CKPT_ASSIGN_OR_RETURN(std::string format, json_string(json, "format", where + " header"));
  if (format != kNativeHeaderFormat) return Status::corruption(where + ": header format is '" + format + "'");
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* list, json_array(json, "chunks", where + " header"));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* metadata, json_object(json, "metadata", where + " header"));
  if (list->size() > kMaxChunksPerShard) return Status::corruption(where + ": too many chunks");

  file->metadata_ = *metadata;
  file->chunks_.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(
        ChunkInfo c, ChunkInfo::from_json((*list)[i], [&] { return where + " chunk " + std::to_string(i); }));
    file->chunks_.push_back(std::move(c));
  }
  CKPT_RETURN_IF_ERROR(
      check_payload_layout(file->chunks_, kNativePreambleBytes + header_len, source->size(), where));
  file->source_ = std::move(source);
  return file;
}

namespace {

// The preamble read and checked, the header read into `header` and checked against its own digest,
// and (where asked) the manifest's digest of both taken; the header's length.
Result<uint64_t> read_checked_header(const ByteSource& source, Sha256Digest* manifest_digest,
                                     std::string& header) {
  const std::string where = source.name();
  uint8_t preamble[kNativePreambleBytes];
  CKPT_ASSIGN_OR_RETURN(const uint64_t header_len, read_preamble(source, preamble));
  // With simdjson's padding behind it the header is parsed where it lies: at 20,000 chunks a shard
  // a padded copy was 5 MB more per shard being opened.
  const size_t capacity = static_cast<size_t>(header_len) + kReadPaddingBytes;
  if (header.capacity() < capacity) {
    // A quarter more than this header: the next shard's is rarely much longer.
    std::string().swap(header);
    header.reserve(capacity + capacity / 4);
    advise_huge_pages(header.data(), header.capacity());
  }
  header.resize(static_cast<size_t>(header_len));
  CKPT_RETURN_IF_ERROR(source.read_at(kNativePreambleBytes, header.data(), header.size()));
  // The header's own digest and, where asked, the manifest's (preamble and header): one pass over
  // the header compresses both streams side by side.
  Sha256 header_hash;
  if (manifest_digest) {
    Sha256 both;
    both.update(preamble, sizeof(preamble));
    sha256_update_two(header_hash, header.data(), header.size(), both, header.data(), header.size());
    *manifest_digest = both.finish();
  } else {
    header_hash.update(header.data(), header.size());
  }
  const std::string header_sha = digest_hex(header_hash.finish());
  const std::string expected_sha = to_hex(preamble + 24, 32);
  if (header_sha != expected_sha) {
    return Status::corruption(where + " @" + std::to_string(kNativePreambleBytes) +
                              ": header sha256 mismatch: expected " + expected_sha + " got " + header_sha);
  }
  return header_len;
}

}  // namespace

Result<std::unique_ptr<NativeShardFile>> open_native_shard(std::unique_ptr<ByteSource> source) {
  std::string header;
  CKPT_ASSIGN_OR_RETURN(const uint64_t header_len, read_checked_header(*source, nullptr, header));
  return open_header_read(std::move(source), header, header_len);
}

Status read_native_shard_entries(std::unique_ptr<ByteSource> source, NativeHeaderScratch& scratch,
                                 const NativeEntryVisitor& visit, nlohmann::json* metadata) {
  std::string& header = scratch.header;
  Sha256Digest manifest_digest{};
  CKPT_ASSIGN_OR_RETURN(const uint64_t header_len, read_checked_header(*source, &manifest_digest, header));
  if (visit.header_read) CKPT_RETURN_IF_ERROR(visit.header_read(manifest_digest));
  // Where the payloads lie, kept to check their layout as open_native_shard does.
  std::vector<PayloadPlace> places;
  const bool walked = walk_native_header_fast(
      header, kMaxChunksPerShard, metadata,
      [&](const NativeChunkFields& f) {
        places.push_back({f.data_offset, f.data_bytes, places.size()});
        visit.entry(f);
        return true;
      },
      &scratch);
  if (walked &&
      find_layout_fault(std::move(places), kNativePreambleBytes + header_len, source->size()).fault ==
          LayoutFault::kNone)
    return Status::ok();
  // Any other header, or a layout at fault: the reader's own reading, whose errors are the
  // reference, and whose chunks then replace what the walk gave.
  visit.restart();
  CKPT_ASSIGN_OR_RETURN(auto file, open_header_read(std::move(source), header, header_len));
  for (const ChunkInfo& c : file->chunks()) visit.entry(fields_of(c));
  *metadata = file->metadata();
  return Status::ok();
}

Result<uint64_t> native_shard_header_length(const ByteSource& source) {
  uint8_t preamble[kNativePreambleBytes];
  CKPT_RETURN_IF_ERROR(source.read_at(0, preamble, sizeof(preamble)));
  const uint64_t header_len = decode_le64(preamble + 16);
  if (header_len == 0 || header_len > kMaxHeaderBytes) {
    return Status::corruption(source.name() + " @16: header length " + std::to_string(header_len) +
                              " out of bounds");
  }
  return header_len;
}

Result<std::string> native_shard_header_digest(const ByteSource& source) {
  CKPT_ASSIGN_OR_RETURN(const uint64_t header_len, native_shard_header_length(source));
  return sha256_hex_of_range(source, 0, kNativePreambleBytes + header_len);
}

std::optional<nlohmann::json> native_header_metadata_if_laid_out(
    const ByteSource& source, size_t count, const std::function<NativeChunkFields(size_t)>& chunk) {
  // open_native_shard's checks of the preamble; any failure is its to name.
  uint8_t preamble[kNativePreambleBytes];
  if (count > kMaxChunksPerShard) return std::nullopt;
  const Result<uint64_t> header_len = read_preamble(source, preamble);
  if (!header_len.is_ok()) return std::nullopt;
  HeaderStream header(source, *header_len);
  if (!header.next_is(kHeaderHead)) return std::nullopt;
  std::vector<PayloadPlace> places;
  places.reserve(count);
  std::string entry;
  try {
    for (size_t i = 0; i < count; ++i) {
      const NativeChunkFields c = chunk(i);
      if (!chunk_entry_is_consistent(c.name, c.dtype, c.global_shape, c.offsets, c.shape, c.data_bytes,
                                     c.sha256))
        return std::nullopt;
      entry.clear();
      append_chunk_entry(entry, c, i == 0);
      if (!header.next_is(entry)) return std::nullopt;
      places.push_back({c.data_offset, c.data_bytes, i});
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a name that is not UTF-8: the reader says what it makes of the header
  }
  if (!header.next_is(header_up_to_metadata())) return std::nullopt;
  // What is left: the metadata object, the root's '}', then the writer's padding of spaces.
  std::optional<std::string> rest = header.rest();
  if (!rest) return std::nullopt;
  const Sha256Digest digest = header.digest();
  if (std::memcmp(digest.data(), preamble + 24, digest.size()) != 0) return std::nullopt;
  const size_t end = rest->find_last_not_of(' ');
  if (end == std::string::npos || (*rest)[end] != '}') return std::nullopt;
  rest->resize(end);
  auto metadata = parse_json(*rest, source.name() + " header metadata");
  if (!metadata.is_ok() || !metadata->is_object()) return std::nullopt;
  if (find_layout_fault(std::move(places), kNativePreambleBytes + *header_len, source.size()).fault !=
      LayoutFault::kNone)
    return std::nullopt;
  return std::move(*metadata);
}

Result<std::unique_ptr<NativeShardFile>> open_native_shard_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  return open_native_shard(std::move(source));
}

Status NativeShardFile::read_chunk(size_t index, uint64_t offset, void* out, size_t length) const {
  if (index >= chunks_.size())
    return Status::invalid_argument(path() + ": no chunk " + std::to_string(index));
  const ChunkInfo& c = chunks_[index];
  if (!range_within(offset, length, c.data_bytes)) {
    return Status::invalid_argument(path() + ": read past the end of " + c.label());
  }
  return source_->read_at(c.data_offset + offset, out, length);
}

}  // namespace ckpt
