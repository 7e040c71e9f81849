#include "formats/native_shard.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/byte_coding.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/json_text_writer.h"
#include "base/sha256.h"
#include "base/streaming_file_writer.h"
#include "formats/native_header_fast_parse.h"
#include "formats/native_shard_format.h"

namespace ckpt {

namespace {

// Serialises the header for payloads laid out from `payload_start`, filling data_offset.
// The header text, compact with sorted keys (what nlohmann's dump() of the same object gives),
// written field by field: building the object first took most of a save of 20,000 chunks a shard,
// and a save lays the header out two or three times (issue 44).
std::string layout_header(std::vector<ChunkInfo>& chunks, const nlohmann::json& metadata,
                          uint64_t payload_start) {
  uint64_t offset = payload_start;
  std::string text;
  auto sink = std::make_shared<nlohmann::detail::output_string_adapter<char>>(text);
  JsonTextWriter w(sink, -1);
  w.open('{');
  w.key("chunks", true);
  w.open('[');
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkInfo& c = chunks[i];
    const uint64_t alignment =
        c.data_bytes >= kPageAlignedPayloadMinBytes ? kPagePayloadAlignment : kPayloadAlignment;
    c.data_offset = align_up(offset, alignment);
    offset = c.data_offset + c.data_bytes;
    // ChunkInfo::to_json()'s fields, in sorted order.
    w.element(i == 0);
    w.open('{');
    w.key("component", true);
    w.string(c.component);
    w.key("data_bytes");
    w.number(c.data_bytes);
    w.key("data_offset");
    w.number(c.data_offset);
    w.key("dtype");
    w.string(dtype_name(c.dtype));
    w.key("global_shape");
    w.dims(c.global_shape);
    w.key("name");
    w.string(c.name);
    w.key("offsets");
    w.dims(c.offsets);
    w.key("sha256");
    w.string(c.sha256);
    w.key("shape");
    w.dims(c.shape);
    w.close('}');
  }
  w.close(']');
  w.key("format");
  w.string("ckptcheck.native-shard");
  w.key("metadata");
  w.value(metadata);
  w.close('}');
  return text;
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
  for (;;) {
    header = layout_header(chunks, metadata, payload_start);
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
    CKPT_RETURN_IF_ERROR(file->append(payloads[i].data, static_cast<size_t>(chunks[i].data_bytes), &sha));
    chunks[i].sha256 = sha.finish_hex();
  }

  const uint64_t placeholder_length = header.size();
  header = layout_header(chunks, metadata, payload_start);
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

Status check_payload_layout(std::vector<ChunkInfo>& chunks, uint64_t payload_start, uint64_t file_size,
                            const std::string& where) {
  std::vector<const ChunkInfo*> by_offset;
  for (const auto& c : chunks) by_offset.push_back(&c);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ChunkInfo* a, const ChunkInfo* b) { return a->data_offset < b->data_offset; });
  uint64_t end = payload_start;
  for (const ChunkInfo* c : by_offset) {
    if (c->data_offset % kPayloadAlignment != 0) {
      return Status::corruption(where + " @" + std::to_string(c->data_offset) + ": payload of " + c->label() +
                                " is not " + std::to_string(kPayloadAlignment) + "-byte aligned");
    }
    if (c->data_offset < end) {
      return Status::corruption(where + " @" + std::to_string(c->data_offset) + ": payload of " + c->label() +
                                " overlaps the header or a previous payload (which ends at " +
                                std::to_string(end) + ")");
    }
    if (c->data_bytes > UINT64_MAX - c->data_offset) {
      return Status::corruption(where + ": payload range of " + c->label() + " overflows");
    }
    end = c->data_offset + c->data_bytes;
  }
  if (end > file_size) {
    return Status::truncated(where + ": file has " + std::to_string(file_size) +
                             " bytes but its header places payloads up to byte " + std::to_string(end) +
                             " (torn write?)");
  }
  if (align_up(end, kPayloadAlignment) < file_size) {
    return Status::corruption(where + ": " + std::to_string(file_size - end) +
                              " unexpected bytes after the last payload (at " + std::to_string(end) + ")");
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<NativeShardFile>> open_native_shard(std::unique_ptr<ByteSource> source) {
  const std::string where = source->name();
  if (source->size() < kNativePreambleBytes) {
    return Status::truncated(where + ": " + std::to_string(source->size()) + " bytes is shorter than the " +
                             std::to_string(kNativePreambleBytes) + "-byte preamble");
  }
  uint8_t preamble[kNativePreambleBytes];
  CKPT_RETURN_IF_ERROR(source->read_at(0, preamble, sizeof(preamble)));
  if (!looks_like_native_shard(preamble, sizeof(preamble))) {
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
  if (header_len > source->size() - kNativePreambleBytes) {
    return Status::truncated(where + " @16: header length " + std::to_string(header_len) +
                             " runs past the end of the " + std::to_string(source->size()) + "-byte file");
  }
  std::string header;
  // With simdjson's padding behind it the header is parsed where it lies: at 20,000 chunks a shard
  // a padded copy was 5 MB more per shard being opened.
  header.reserve(static_cast<size_t>(header_len) + kReadPaddingBytes);
  header.resize(static_cast<size_t>(header_len));
  CKPT_RETURN_IF_ERROR(source->read_at(kNativePreambleBytes, header.data(), header.size()));
  const std::string header_sha = sha256_hex(header);
  const std::string expected_sha = to_hex(preamble + 24, 32);
  if (header_sha != expected_sha) {
    return Status::corruption(where + " @" + std::to_string(kNativePreambleBytes) +
                              ": header sha256 mismatch: expected " + expected_sha + " got " + header_sha);
  }
  auto file = std::unique_ptr<NativeShardFile>(new NativeShardFile());
  file->header_bytes_ = header_len;
  // simdjson for a header laid out as the writer lays it out; nlohmann (the reference, with its
  // errors) for any other (formats/native_header_fast_parse.h).
  if (std::optional<NativeHeaderFields> fast = parse_native_header_fast(header, kMaxChunksPerShard)) {
    file->metadata_ = std::move(fast->metadata);
    *file->chunks_ = std::move(fast->chunks);
    CKPT_RETURN_IF_ERROR(
        check_payload_layout(*file->chunks_, kNativePreambleBytes + header_len, source->size(), where));
    file->source_ = std::move(source);
    return file;
  }
  CKPT_ASSIGN_OR_RETURN(auto json, parse_json(header, where + " header"));
  CKPT_ASSIGN_OR_RETURN(std::string format, json_string(json, "format", where + " header"));
  if (format != "ckptcheck.native-shard")
    return Status::corruption(where + ": header format is '" + format + "'");
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* list, json_array(json, "chunks", where + " header"));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* metadata, json_object(json, "metadata", where + " header"));
  if (list->size() > kMaxChunksPerShard) return Status::corruption(where + ": too many chunks");

  file->metadata_ = *metadata;
  file->chunks_->reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(
        ChunkInfo c, ChunkInfo::from_json((*list)[i], [&] { return where + " chunk " + std::to_string(i); }));
    file->chunks_->push_back(std::move(c));
  }
  CKPT_RETURN_IF_ERROR(
      check_payload_layout(*file->chunks_, kNativePreambleBytes + header_len, source->size(), where));
  file->source_ = std::move(source);
  return file;
}

Result<std::string> native_shard_header_digest(const ByteSource& source) {
  uint8_t preamble[kNativePreambleBytes];
  CKPT_RETURN_IF_ERROR(source.read_at(0, preamble, sizeof(preamble)));
  const uint64_t header_len = decode_le64(preamble + 16);
  if (header_len == 0 || header_len > kMaxHeaderBytes) {
    return Status::corruption(source.name() + " @16: header length " + std::to_string(header_len) +
                              " out of bounds");
  }
  return sha256_hex_of_range(source, 0, kNativePreambleBytes + header_len);
}

Result<std::unique_ptr<NativeShardFile>> open_native_shard_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  return open_native_shard(std::move(source));
}

Status NativeShardFile::read_chunk(size_t index, uint64_t offset, void* out, size_t length) const {
  if (index >= chunks_->size())
    return Status::invalid_argument(path() + ": no chunk " + std::to_string(index));
  const ChunkInfo& c = (*chunks_)[index];
  if (!range_within(offset, length, c.data_bytes)) {
    return Status::invalid_argument(path() + ": read past the end of " + c.label());
  }
  return source_->read_at(c.data_offset + offset, out, length);
}

}  // namespace ckpt
