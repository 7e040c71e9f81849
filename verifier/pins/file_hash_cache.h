// SHA-256 of large, rarely-changing files (the shared libraries in the container fingerprint),
// remembered across processes. Hashing libtorch_cpu costs ~1.7 s, and every drill child would pay
// it; the cache is keyed by (device, inode, size, mtime in ns), so a replaced library is rehashed.
// A missing, corrupt or unwritable cache only costs time: it is never trusted beyond its keys.
#pragma once

#include <string>

#include "base/status.h"

namespace ckpt {

// $CKPTCHECK_CACHE_DIR, else $XDG_CACHE_HOME/ckptcheck, else $HOME/.cache/ckptcheck.
std::string default_hash_cache_path();

Result<std::string> cached_file_sha256(const std::string& path,
                                       const std::string& cache_path = default_hash_cache_path());

}  // namespace ckpt
