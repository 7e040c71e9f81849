// One sequential pass over a shard file that computes everything `verify` needs from its data:
// the whole-file SHA-256, each chunk's payload SHA-256 and each floating chunk's NaN/Inf counts.
//
// Why one pass: the file is read in kScanBlockBytes blocks with pread and every block feeds the
// file hasher and the hasher of the chunk whose payload it holds, so the data is read once
// (`sha256sum` plus a per-chunk check would read it twice). Memory is one block per shard being
// scanned, whatever the checkpoint's size.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"
#include "verifier/tensors/nonfinite_count.h"

namespace ckpt {

constexpr size_t kScanBlockBytes = 4 << 20;

// What the shard's manifest digest covers (ManifestShard::sha256_of).
enum class ShardDigest { kWholeFile, kNativeHeader };

struct ShardScan {
  // The shard's digest in the requested scope: the whole file, or (native) preamble + header.
  std::string file_sha256;
  // kNativeHeader only: the first byte outside the header and every payload that is not zero
  // padding, or -1. Such a byte is covered by no hash, so the verifier must reject it.
  int64_t stray_byte_offset = -1;
  uint64_t file_bytes = 0;
  std::vector<std::string> chunk_sha256;        // by index in file.chunks()
  std::vector<NonfiniteCount> chunk_nonfinite;  // by index in file.chunks()
};

// Scans `path`, whose chunks `file` describes. For the native format (payloads stored raw at
// data_offset, non-overlapping: its reader checks this) it is the single pass; other formats fall
// back to a file pass plus a read_chunk pass per chunk. `bytes_done` (may be null) is advanced as
// bytes are hashed, for progress.
Result<ShardScan> scan_shard(const std::string& path, const TensorFile& file,
                             std::atomic<uint64_t>* bytes_done, size_t block_bytes = kScanBlockBytes,
                             ShardDigest digest = ShardDigest::kWholeFile);

}  // namespace ckpt
