// The native shard format: one header shared by the reader and the writer. Spec: formats/README.md.
//
//   offset  size  field
//   0       8     magic "CKPTSHD\0"
//   8       4     format version, u32 little-endian (kNativeShardVersion)
//   12      4     flags, u32 LE (0; a reader refuses unknown bits)
//   16      8     header length H, u64 LE, 0 < H <= kMaxHeaderBytes
//   24      32    SHA-256 of the H header bytes
//   56      H     header: UTF-8 JSON object (see README), space-padded so payloads start aligned
//   ...           payloads, each at a kPayloadAlignment-aligned absolute offset, zero-padded between
//
// Invariant: every payload lies inside the file, payloads do not overlap, and each has a SHA-256 in
// the header, so a shard is verifiable alone, without its manifest or the process that wrote it.
#pragma once

#include <cstdint>

namespace ckpt {

constexpr char kNativeShardMagic[8] = {'C', 'K', 'P', 'T', 'S', 'H', 'D', '\0'};
constexpr uint32_t kNativeShardVersion = 1;
constexpr uint64_t kNativePreambleBytes = 56;
constexpr uint64_t kMaxHeaderBytes = 16ull << 20;  // 16 MiB: ~100k chunks, far above any real shard
constexpr uint64_t kMaxChunksPerShard = 1u << 20;
constexpr const char* kNativeHeaderFormat = "ckptcheck.native-shard";  // the header's "format"
constexpr uint64_t kPayloadAlignment = 64;  // cache line; lets readers mmap/DMA payloads directly
// A writer's choice within the format (readers require only kPayloadAlignment): payloads of at
// least kPageAlignedPayloadMinBytes start on a 4 KiB page, so a loader can map the row blocks of a
// tensor split over several shards side by side into one zero-copy array (shards/mapped_checkpoint.h).
constexpr uint64_t kPageAlignedPayloadMinBytes = 64u << 10;
constexpr uint64_t kPagePayloadAlignment = 4096;
constexpr const char* kNativeShardExtension = ".cks";

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace ckpt
