#include "verifier/check/shard_scan.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <string_view>

#include "base/byte_coding.h"
#include "base/byte_source.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/native_shard_format.h"

namespace ckpt {

namespace {

void advance(std::atomic<uint64_t>* bytes_done, uint64_t n) {
  if (bytes_done) bytes_done->fetch_add(n, std::memory_order_relaxed);
}

// The chunk payload currently streaming past: its hasher and NaN counter exist only while the
// pass is inside its byte range, so at most one of each is alive at a time.
struct OpenChunk {
  size_t index;
  std::unique_ptr<Sha256> hash = std::make_unique<Sha256>();
  NonfiniteCounter nonfinite;
};

// Marks where bytes not covered by any payload hash must be zero: everything past the header
// that no payload occupies (alignment padding).
void find_stray_bytes(const uint8_t* block, uint64_t pos, size_t n, uint64_t header_end,
                      const std::vector<ChunkInfo>& chunks, const std::vector<size_t>& order, size_t next,
                      int64_t* stray) {
  if (*stray >= 0) return;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t at = pos + i;
    if (at < header_end || block[i] == 0) continue;
    bool in_payload = false;
    // Payloads are sorted; only the ones from `next` on can still contain this block's bytes.
    for (size_t k = next; k < order.size() && chunks[order[k]].data_offset <= at; ++k) {
      const ChunkInfo& c = chunks[order[k]];
      if (at < c.data_offset + c.data_bytes) {
        in_payload = true;
        i += static_cast<size_t>(c.data_offset + c.data_bytes - at) - 1;  // skip the rest of it
        break;
      }
    }
    if (!in_payload) {
      *stray = static_cast<int64_t>(at);
      return;
    }
  }
}

Result<ShardScan> scan_in_one_pass(const std::string& path, const TensorFile& file,
                                   std::atomic<uint64_t>* bytes_done, size_t block_bytes,
                                   ShardDigest digest) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  const bool whole_file = digest == ShardDigest::kWholeFile;
  uint64_t header_end = 0;
  std::string header_digest;
  if (!whole_file) {
    CKPT_ASSIGN_OR_RETURN(header_digest, native_shard_header_digest(*source));
    uint8_t len[8];
    CKPT_RETURN_IF_ERROR(source->read_at(16, len, 8));
    header_end = decode_le64(len) + kNativePreambleBytes;
  }
  const auto& chunks = file.chunks();
  ShardScan scan;
  scan.file_bytes = source->size();
  scan.chunk_sha256.resize(chunks.size());
  scan.chunk_nonfinite.resize(chunks.size());
  std::vector<size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return chunks[a].data_offset < chunks[b].data_offset; });

  std::vector<uint8_t> block(
      static_cast<size_t>(std::min<uint64_t>(block_bytes, std::max<uint64_t>(1, scan.file_bytes))));
  Sha256 file_hash;
  size_t next = 0;  // position in `order` of the next chunk not yet finished
  std::unique_ptr<OpenChunk> open;
  auto finish_open = [&] {
    scan.chunk_sha256[open->index] = open->hash->finish_hex();
    scan.chunk_nonfinite[open->index] = open->nonfinite.count();
    open.reset();
    ++next;
  };
  for (uint64_t pos = 0; pos < scan.file_bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), scan.file_bytes - pos));
    CKPT_RETURN_IF_ERROR(source->read_at(pos, block.data(), n));
    if (whole_file) {
      file_hash.update(block.data(), n);
    } else {
      find_stray_bytes(block.data(), pos, n, header_end, chunks, order, next, &scan.stray_byte_offset);
    }
    const uint64_t block_end = pos + n;
    while (next < order.size()) {
      const ChunkInfo& c = chunks[order[next]];
      if (c.data_offset > block_end || (c.data_offset == block_end && c.data_bytes > 0)) break;
      if (!open)
        open.reset(new OpenChunk{order[next], std::make_unique<Sha256>(), NonfiniteCounter(c.dtype)});
      const uint64_t lo = std::max(c.data_offset, pos);
      const uint64_t hi = std::min(c.data_offset + c.data_bytes, block_end);
      if (hi > lo) {
        open->hash->update(block.data() + (lo - pos), static_cast<size_t>(hi - lo));
        open->nonfinite.feed(block.data() + (lo - pos), static_cast<size_t>(hi - lo));
      }
      if (c.data_offset + c.data_bytes > block_end) break;  // continues in the next block
      finish_open();
    }
    advance(bytes_done, n);
    pos = block_end;
  }
  // Only zero-byte chunks can remain (the reader places every payload inside the file).
  while (next < order.size()) {
    const ChunkInfo& c = chunks[order[next]];
    if (c.data_bytes != 0)
      return Status::truncated(path + ": payload of " + c.label() + " lies past the end of the file");
    if (!open) open.reset(new OpenChunk{order[next], std::make_unique<Sha256>(), NonfiniteCounter(c.dtype)});
    finish_open();
  }
  scan.file_sha256 = whole_file ? file_hash.finish_hex() : header_digest;
  return scan;
}

Result<ShardScan> scan_in_two_passes(const std::string& path, const TensorFile& file,
                                     std::atomic<uint64_t>* bytes_done, size_t block_bytes) {
  ShardScan scan;
  CKPT_ASSIGN_OR_RETURN(scan.file_sha256, sha256_hex_of_file(path, &scan.file_bytes));
  advance(bytes_done, scan.file_bytes);
  const auto& chunks = file.chunks();
  scan.chunk_sha256.resize(chunks.size());
  scan.chunk_nonfinite.resize(chunks.size());
  std::vector<uint8_t> block;
  for (size_t i = 0; i < chunks.size(); ++i) {
    block.resize(static_cast<size_t>(std::min<uint64_t>(chunks[i].data_bytes, block_bytes)));
    Sha256 hash;
    NonfiniteCounter nonfinite(chunks[i].dtype);
    for (uint64_t done = 0; done < chunks[i].data_bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunks[i].data_bytes - done, block.size()));
      CKPT_RETURN_IF_ERROR(file.read_chunk(i, done, block.data(), n));
      hash.update(block.data(), n);
      nonfinite.feed(block.data(), n);
      done += n;
    }
    scan.chunk_sha256[i] = hash.finish_hex();
    scan.chunk_nonfinite[i] = nonfinite.count();
  }
  return scan;
}

}  // namespace

Result<ShardScan> scan_shard(const std::string& path, const TensorFile& file,
                             std::atomic<uint64_t>* bytes_done, size_t block_bytes, ShardDigest digest) {
  if (digest == ShardDigest::kNativeHeader && std::string_view(file.format_name()) != "native") {
    return Status::invalid_argument(path + ": a header digest is defined only for native shards");
  }
  if (std::string_view(file.format_name()) == "native")
    return scan_in_one_pass(path, file, bytes_done, block_bytes, digest);
  return scan_in_two_passes(path, file, bytes_done, block_bytes);
}

}  // namespace ckpt
