// A version-2 manifest's chunk records, taken from the headers of its native shards (issue 44).
// The manifest records each header's SHA-256 (preamble and JSON, "sha256_of": "header"), so a
// header whose bytes hash to it is the one the writer committed, and its chunk entries are as
// covered by the manifest's digest and signature as version 1's listed records were. Each header
// is opened by the native reader (every check it makes: preamble, its own digest, each entry, the
// payload layout) and its chunks are given to the manifest's tensors by name, in shard order and
// header order: the order version 1 lists them in.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "shards/laid_out_native_shard.h"
#include "shards/manifest.h"

namespace ckpt {

// What reading one shard's header found.
struct ShardHeaderChunks {
  enum class Problem {
    kNone,
    kPath,            // missing, unsafe or not a regular file: resolve_shard_path's status says which
    kUnreadable,      // the native reader refused the file (status: its one-line reason)
    kTruncated,       // the file ends inside its header or before a payload
    kDigestMismatch,  // the header is not the one the manifest's digest covers
    kDisagrees,       // a chunk's dtype or global shape is not its tensor's, or its tensor is not listed
  };
  Problem problem = Problem::kNone;
  Status status;  // why, naming the shard file; ok when problem is kNone
  // Without a problem: the header's metadata, and the shard's chunks in header order (payload
  // order), as records of the manifest they were added to (valid while it lives; moving it keeps
  // them), from which a reader opens the shard without reading its header again
  // (open_native_shard_from_records, shards/laid_out_native_shard.h).
  nlohmann::json metadata;
  std::vector<ManifestChunkRef> in_header_order;
};

// Fills every tensor's chunks of a version-2 `manifest` (read from `checkpoint_dir`) from its shard
// headers, `jobs` at a time (0: one per core), and says what each shard's header gave, by shard.
// A shard with a problem adds no chunk. A version-1 manifest, or one whose chunks were filled
// already, is left as it is (every entry kNone).
std::vector<ShardHeaderChunks> add_chunks_from_shard_headers(const std::string& checkpoint_dir,
                                                             Manifest& manifest, size_t jobs = 0);

// The first shard problem of `read`, as a status (ok when there is none).
Status first_shard_header_problem(const std::vector<ShardHeaderChunks>& read);

}  // namespace ckpt
