#include "verifier/pins/file_hash_cache.h"

#include <gtest/gtest.h>

#include "base/file_io.h"
#include "base/sha256.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

TEST(FileHashCache, HitsOnlyWhileTheFileIsUnchanged) {
  testing::TempDir dir;
  const std::string lib = dir / "libfake.so";
  const std::string cache = dir / "cache/file-hashes.json";
  ASSERT_TRUE(write_file_atomically(lib, "version one").is_ok());
  EXPECT_EQ(*cached_file_sha256(lib, cache), sha256_hex(std::string("version one")));
  ASSERT_TRUE(is_regular_file(cache));
  // A poisoned entry under a key that no longer matches must not be returned.
  ASSERT_TRUE(write_file_atomically(lib, "version two, longer").is_ok());
  EXPECT_EQ(*cached_file_sha256(lib, cache), sha256_hex(std::string("version two, longer")));
}

TEST(FileHashCache, CorruptCacheIsIgnored) {
  testing::TempDir dir;
  const std::string lib = dir / "libfake.so";
  const std::string cache = dir / "file-hashes.json";
  ASSERT_TRUE(write_file_atomically(lib, "bytes").is_ok());
  ASSERT_TRUE(write_file_atomically(cache, "{not json").is_ok());
  EXPECT_EQ(*cached_file_sha256(lib, cache), sha256_hex(std::string("bytes")));
  EXPECT_FALSE(cached_file_sha256(dir / "missing.so", cache).is_ok());
}

}  // namespace
}  // namespace ckpt
