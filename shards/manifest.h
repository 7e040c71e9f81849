// manifest.json: the table of contents of one checkpoint and the proof that it was committed.
// Invariant: the manifest is the last file written into a checkpoint; its presence is the commit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/dims.h"
#include "base/embedded_digest.h"
#include "base/sha256.h"
#include "base/status.h"
#include "formats/dtype.h"

namespace ckpt {

constexpr const char* kManifestFileName = "manifest.json";
constexpr const char* kManifestFormat = "ckptcheck.manifest";
// Version 1 lists every chunk's record in the manifest, beside the same record in its shard's
// header. Version 2 (issue 44) lists them only in the headers of its native shards, whose SHA-256
// the manifest records ("sha256_of": "header"), so its own digest and a signature of it still cover
// every chunk's fields and payload hash. At 320,000 chunks the chunk records were 97% of an 87 MB
// manifest that every reader parsed, hashed and compared with the headers it read anyway.
constexpr int kManifestVersionChunksListed = 1;
constexpr int kManifestVersionChunksInHeaders = 2;
// The largest manifest.json a reader opens (and the writer commits): ~4 million chunks at ~260 bytes
// each. The metadata pass holds the text and its records, ~4x the text at most (issue 44's bench
// measures it); 256 MiB refused the manifest of a 1,020,880-chunk checkpoint convert had written.
constexpr uint64_t kMaxManifestBytes = 1ull << 30;

struct ManifestShard {
  std::string path;  // relative to the checkpoint dir; never absolute, never containing ".."
  std::string format = "native";
  uint64_t bytes = 0;
  std::string sha256;
  int64_t rank = 0;                // the process that wrote it
  std::string sha256_of = "file";  // "file" (whole file) | "header" (native: preamble + header;
                                   // safetensors: length field + JSON header; hdf5:
                                   // the metadata before the first payload)
};

struct ManifestChunk {
  size_t shard = 0;  // index into Manifest::shards
  Dims offsets;      // inline, not vectors: two heap blocks a chunk (base/dims.h)
  Dims shape;
  uint64_t data_offset = 0;  // byte offset of the payload inside the shard file
  uint64_t data_bytes = 0;
  // The payload's SHA-256, held as its 32 bytes: as 64 hex characters it was a heap string of 80
  // bytes and an allocation for each of a million chunks (issue 44). The text spells it in
  // lowercase hex (digest_hex), the only spelling a manifest's chunk may have.
  Sha256Digest sha256{};
};

struct ManifestTensor {
  std::string name;
  std::string component;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<ManifestChunk> chunks;
};

// Where a manifest's chunk records are: in its text (version 1), or in its shards' headers
// (version 2), from which read_manifest_file and verify fill ManifestTensor::chunks
// (shards/shard_header_chunks.h). Either way, a Manifest a reader is given holds every chunk.
enum class ChunkRecords { kInManifest, kInShardHeaders };

struct Manifest {
  int64_t step = 0;
  ChunkRecords chunk_records = ChunkRecords::kInManifest;
  std::string created_utc;
  int64_t world_size = 1;
  std::string strategy = "single";
  nlohmann::json config = nlohmann::json::object();  // the resolved config
  nlohmann::json pins = nlohmann::json::object();
  nlohmann::json extra = nlohmann::json::object();  // e.g. allowed drift overrides
  std::vector<ManifestShard> shards;
  std::vector<ManifestTensor> tensors;

  const ManifestTensor* find_tensor(const std::string& name) const;
};

// The version a manifest of these chunk records is written as.
int manifest_version_of(ChunkRecords records);
// Whether a version-2 manifest may keep this shard's chunk records in its header: a native shard
// whose header (preamble and JSON) is what the manifest's digest of it covers.
bool holds_chunks_in_header(const ManifestShard& shard);

// The manifest as committed: pretty JSON whose "manifest_sha256" is the SHA-256 of the canonical
// text of everything else (compact, keys sorted), so an edit to any field is detectable even
// where no shard check looks (config, pins, extra).
std::string manifest_to_json_text(const Manifest& manifest);

constexpr const char* kManifestDigestField = "manifest_sha256";

// What a manifest's own digest says about its text (base/embedded_digest.h).
using ManifestDigest = EmbeddedDigest;
// Fails only when `text` is not a JSON object (parse_manifest says why).
Result<ManifestDigest> manifest_digest(const std::string& text, const std::string& where);
// Strict parse of untrusted text: every field typed, every shard path safe, chunk shard indices in
// range, no duplicate shard paths or tensor names. `where` names the file in errors.
Result<Manifest> parse_manifest(const std::string& text, const std::string& where);
// The same, and what manifest_digest(text) says, from one parse of the text.
Result<Manifest> parse_manifest(const std::string& text, const std::string& where, ManifestDigest* digest);
// The nlohmann path alone, whose errors and digest are the reference parse_manifest's fast path
// (shards/manifest_fast_parse.h) is held to: what parse_manifest runs for any text the fast path
// leaves, and what the tests and the manifest fuzz target compare the fast path with.
Result<Manifest> parse_manifest_reference(const std::string& text, const std::string& where,
                                          ManifestDigest* digest);
// read + parse + digest: a manifest whose recorded digest differs from its content is refused
// (kCorruption), so nothing resumes from an edited one. One without a digest is accepted.
// `digest`, when given, receives what the manifest's digest said (computed: its content's).
// A version-2 manifest's chunks are read from its shard headers, each checked against the digest
// the manifest records for it: the first shard that cannot give them fails the read, named.
Result<Manifest> read_manifest_file(const std::string& checkpoint_dir, ManifestDigest* digest = nullptr);
// Only the manifest's own fields, read, parsed and checked against its digest: a version-2
// manifest's chunks are not read from its shard headers (its tensors have none), so a damaged
// shard does not stop a caller that needs the step, config or pins.
Result<Manifest> read_manifest_fields(const std::string& checkpoint_dir, ManifestDigest* digest = nullptr);
struct ShardHeaderChunks;
// The same, and what reading each shard's header gave (version 2; empty for version 1): a reader
// opens the shards from it without reading their headers again (shards/shard_header_chunks.h).
Result<Manifest> read_manifest_file(const std::string& checkpoint_dir, ManifestDigest* digest,
                                    std::vector<ShardHeaderChunks>* header_reads);

// A path a manifest may name: relative, no "..", no empty or "." segments, no backslashes or NULs.
bool is_safe_relative_path(const std::string& path);

}  // namespace ckpt
