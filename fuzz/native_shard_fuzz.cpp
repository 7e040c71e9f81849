// open_native_shard (formats/native_shard.h) over a MemoryByteSource, then the shard's digest and
// every payload; and read_native_shard_entries held to it (the same error, or the same entries).
// The header carries its own SHA-256, so plain mutation stops at that check; the custom mutator
// mutates the header (as JSON or as bytes) and then fixes its length and hash, the way tests
// re-compute hashes after a damage (leveldb's FixChecksum) to reach the checks behind it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/byte_coding.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/native_shard_format.h"
#include "fuzz/fuzz_checks.h"
#include "fuzz/json_mutator.h"

namespace {

// Rewrites the preamble's header length and SHA-256 for the header now in `bytes`.
void fix_header(std::string* bytes, uint64_t header_len) {
  for (int i = 0; i < 8; ++i) (*bytes)[16 + i] = static_cast<char>((header_len >> (8 * i)) & 0xff);
  ckpt::Sha256 hasher;
  hasher.update(bytes->data() + ckpt::kNativePreambleBytes, header_len);
  const ckpt::Sha256Digest digest = hasher.finish();
  std::memcpy(bytes->data() + 24, digest.data(), digest.size());
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  const uint64_t pre = ckpt::kNativePreambleBytes;
  const uint64_t old_len = size >= pre ? ckpt::decode_le(data + 16, 8) : 0;
  if (size < pre || old_len == 0 || old_len > size - pre || rng() % 4 == 0)
    return LLVMFuzzerMutate(data, size, max_size);
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (rng() % 2) {
    // Bytes anywhere (payloads included); the header hash is then made to match again.
    size = LLVMFuzzerMutate(data, size, max_size);
    bytes.assign(reinterpret_cast<const char*>(data), size);
    if (size < pre + old_len) return size;
    fix_header(&bytes, old_len);
  } else {
    // The header as JSON, padded back to its old length when it shrank so payloads stay put.
    std::string header = bytes.substr(pre, old_len);
    const size_t room = max_size > size ? max_size - size : 0;
    header.resize(old_len + room);
    size_t n = ckpt::fuzz::mutate_json(reinterpret_cast<uint8_t*>(header.data()), old_len, old_len + room,
                                       static_cast<unsigned>(rng()));
    header.resize(n);
    if (n < old_len) header.append(old_len - n, ' ');
    bytes = bytes.substr(0, pre) + header + bytes.substr(pre + old_len);
    fix_header(&bytes, header.size());
  }
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto source = ckpt::fuzz::memory_source(data, size);
  (void)ckpt::native_shard_header_digest(*source);
  auto shard = ckpt::open_native_shard(std::move(source));
  if (shard.is_ok()) ckpt::fuzz::probe_tensor_file(**shard, size);

  // The entries a version-2 manifest's reader takes (read_native_shard_entries: the fast walk, or
  // the reader's own path after a restart) must be what open_native_shard gives: the same error, or
  // the same chunks in the same order with the same metadata.
  std::vector<ckpt::ChunkInfo> entries;
  ckpt::NativeEntryVisitor visit;
  visit.entry = [&](const ckpt::NativeChunkFields& f) {
    entries.push_back({std::string(f.name), std::string(f.component), f.dtype, f.global_shape.to_vector(),
                       f.offsets.to_vector(), f.shape.to_vector(), f.data_offset, f.data_bytes,
                       std::string(f.sha256)});
  };
  visit.restart = [&] { entries.clear(); };
  ckpt::NativeHeaderScratch scratch;
  nlohmann::json metadata;
  const ckpt::Status read =
      ckpt::read_native_shard_entries(ckpt::fuzz::memory_source(data, size), scratch, visit, &metadata);
  if (read.is_ok() != shard.is_ok()) __builtin_trap();
  if (!read.is_ok()) {
    if (read.message() != shard.status().message()) __builtin_trap();
    return 0;
  }
  const std::vector<ckpt::ChunkInfo>& chunks = (*shard)->chunks();
  if (entries.size() != chunks.size() || metadata != (*shard)->metadata()) __builtin_trap();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ckpt::ChunkInfo &a = entries[i], &b = chunks[i];
    if (a.name != b.name || a.component != b.component || a.dtype != b.dtype ||
        a.global_shape != b.global_shape || a.offsets != b.offsets || a.shape != b.shape ||
        a.data_offset != b.data_offset || a.data_bytes != b.data_bytes || a.sha256 != b.sha256)
      __builtin_trap();
  }
  return 0;
}
