// Reader and writer of the native shard format (layout: formats/native_shard_format.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_source.h"
#include "base/sha256.h"
#include "formats/native_header_fast_parse.h"
#include "formats/shard_file_writer.h"
#include "formats/tensor_file.h"

namespace ckpt {

// Writes a native shard. Signature: ShardFileWriter.
Result<WrittenFile> write_native_shard(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                       const nlohmann::json& metadata);

class NativeShardFile final : public TensorFile {
 public:
  const std::string& path() const override { return source_->name(); }
  const char* format_name() const override { return "native"; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override;
  const ByteSource* payload_source() const override { return source_.get(); }
  uint64_t header_bytes() const { return header_bytes_; }

 private:
  friend Result<std::unique_ptr<NativeShardFile>> open_header_read(std::unique_ptr<ByteSource> source,
                                                                   const std::string& header,
                                                                   uint64_t header_len);
  std::unique_ptr<ByteSource> source_;
  std::vector<ChunkInfo> chunks_;
  nlohmann::json metadata_;
  uint64_t header_bytes_ = 0;
};

// Parses and validates the preamble and header: magic, version, bounded header length, header
// SHA-256, every chunk's dtype/shape/offsets/byte range. Payload hashes are not checked here (that
// is a streaming pass: see hash_chunk in tensor_file.h). A file that ends before its last payload
// is kTruncated (a torn tail); anything self-contradictory is kCorruption.
Result<std::unique_ptr<NativeShardFile>> open_native_shard(std::unique_ptr<ByteSource> source);
Result<std::unique_ptr<NativeShardFile>> open_native_shard_file(const std::string& path);

// What a reader of a shard's chunk entries is given, in header order, by read_native_shard_entries.
struct NativeEntryVisitor {
  // Once the header is read and checked against its own digest, before any entry: the shard's
  // digest as a manifest records it (native_shard_header_digest). A status other than ok is
  // returned as it is, and no entry is read.
  std::function<Status(const Sha256Digest&)> header_read;
  std::function<void(const NativeChunkFields&)> entry;  // fields valid during the call
  std::function<void()> restart;                        // forget every entry given so far
};

// Every chunk entry of a native shard as open_native_shard would give it, each checked as it checks
// it (preamble, the header's digest, each entry, the payload layout), without a ChunkInfo a chunk:
// the fields go to `visit.entry` as the header is read. A header that the fast reader does not
// take, or whose payload layout is at fault, is then read by open_native_shard's own path: its
// error is returned, or `visit.restart` is called and its chunks are given again. `scratch` is what
// the calling thread keeps from one header to the next (the header is read into its buffer, advised
// as huge pages); `metadata` receives the header's.
Status read_native_shard_entries(std::unique_ptr<ByteSource> source, NativeHeaderScratch& scratch,
                                 const NativeEntryVisitor& visit, nlohmann::json* metadata);

// The shard's digest as a manifest records it (sha256_of "header"): SHA-256 of the preamble and
// header. The header holds every payload's SHA-256 and the reader rejects any byte outside the
// payloads that is not header or zero padding, so the digest plus the payload hashes cover every
// byte of the file.
Result<std::string> native_shard_header_digest(const ByteSource& source);
// The header length H its preamble gives, bounded (0 < H <= kMaxHeaderBytes); the rest of the
// preamble is open_native_shard's to check.
Result<uint64_t> native_shard_header_length(const ByteSource& source);

bool looks_like_native_shard(const uint8_t* head, size_t size);

// The shard's header metadata when its header is byte for byte the one write_native_shard lays out
// for `count` chunks whose fields chunk(i) gives in header order (which is payload order), and
// every check open_native_shard makes passes on them (preamble, header digest, each entry, the
// payload layout): opening the shard would then give exactly those chunks and this metadata, so a
// caller that holds the fields (verify, from the manifest) need not parse 20,000 entries a shard
// to learn that they agree (issue 44). nullopt for anything else: a header laid out otherwise
// (another order, another writer), damaged, unreadable or failing a check; open_native_shard then
// says what.
std::optional<nlohmann::json> native_header_metadata_if_laid_out(
    const ByteSource& source, size_t count, const std::function<NativeChunkFields(size_t)>& chunk);

}  // namespace ckpt
