// Randomized corruption: thousands of mutations of a signed checkpoint (bit flips anywhere,
// truncations, byte overwrites in shard headers and in the manifest JSON), each run through the
// library entry point. Verify must never crash and never pass a changed file. The checkpoint is
// signed because fields like created_utc are checked by nothing but the signature: without it a
// flipped digit there would be a valid, different manifest.
//
// CKPTCHECK_FUZZ_ITERATIONS sets the number of mutations (default 1000, a few seconds).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "tests/support/training_state_fixture.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

size_t fuzz_iterations() {
  const char* env = std::getenv("CKPTCHECK_FUZZ_ITERATIONS");
  return env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : 1000;
}

uint64_t native_header_end(const std::vector<uint8_t>& shard) {
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | shard[16 + i];
  return std::min<uint64_t>(56 + header_len, shard.size());
}

// Rewrites a file in place (pwrite + ftruncate to the new size). Unlike O_TRUNC this never
// truncates to zero, which on ext4 forces a flush on close (auto_da_alloc) and made the test
// I/O-bound.
void overwrite_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes.size())), 0);
  ::close(fd);
}

struct Target {
  std::string path;
  std::vector<uint8_t> original;
  bool is_shard;
};

TEST(VerifyCorruptionFuzz, NeverPassesAChangedFileAndNeverCrashes) {
  TempDir root, keys;
  const std::string dir = save_training_state(root.path(), full_training_state());
  ASSERT_TRUE(write_ed25519_key_pair(keys / "private.pem", keys / "public.pem").is_ok());
  ASSERT_TRUE(sign_checkpoint(dir, keys / "private.pem").is_ok());
  VerifyOptions options;
  options.pubkey_path = keys / "public.pem";
  options.jobs = 2;
  {
    auto clean = verify_checkpoint(dir, options);
    ASSERT_TRUE(clean.is_ok() && clean->ok());
  }
  std::vector<Target> targets;
  targets.push_back({dir + "/" + kManifestFileName, read_file_bytes(dir + "/" + kManifestFileName), false});
  for (const auto& s : read_fixture_manifest(dir).shards) {
    targets.push_back({dir + "/" + s.path, read_file_bytes(dir + "/" + s.path), true});
  }

  std::mt19937_64 rng(0x5eed);
  auto below = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  const size_t iterations = fuzz_iterations();
  size_t by_kind[3] = {};
  for (size_t it = 0; it < iterations; ++it) {
    const Target& target = targets[below(targets.size())];
    std::vector<uint8_t> bytes = target.original;
    const int kind = static_cast<int>(below(3));
    std::string what;
    if (kind == 0) {  // one bit, anywhere in the file
      const uint64_t at = below(bytes.size());
      bytes[at] ^= static_cast<uint8_t>(1u << below(8));
      what = "bit flip @" + std::to_string(at);
    } else if (kind == 1) {  // torn tail
      const uint64_t keep = below(bytes.size());
      bytes.resize(keep);
      what = "truncate to " + std::to_string(keep);
    } else {  // up to 8 random bytes over the shard header or the manifest JSON
      const uint64_t end = target.is_shard ? native_header_end(bytes) : bytes.size();
      const uint64_t at = below(end);
      const uint64_t n = std::min<uint64_t>(1 + below(8), end - at);
      for (uint64_t i = 0; i < n; ++i) bytes[at + i] = static_cast<uint8_t>(below(256));
      if (bytes == target.original) bytes[at] ^= 0x80;  // the overwrite must change something
      what = "overwrite " + std::to_string(n) + " bytes @" + std::to_string(at);
    }
    ++by_kind[kind];
    overwrite_file(target.path, bytes);
    auto report = verify_checkpoint(dir, options);
    overwrite_file(target.path, target.original);
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    ASSERT_FALSE(report->ok()) << "iteration " << it << ": " << what << " of " << target.path
                               << " passed verify";
    ASSERT_FALSE(report->errors.empty());
  }
  EXPECT_GT(by_kind[0] + by_kind[1] + by_kind[2], 0u);
  auto clean = verify_checkpoint(dir, options);
  ASSERT_TRUE(clean.is_ok());
  EXPECT_TRUE(clean->ok()) << "original bytes were not restored";
}

// Without a signature, a shard is covered by its manifest hash: any change to any shard byte fails.
TEST(VerifyCorruptionFuzz, EveryShardBitFlipFailsWithoutASignature) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  const std::string path = fixture_shard_path(dir, 0);
  const std::vector<uint8_t> original = read_file_bytes(path);
  std::mt19937_64 rng(7);
  for (int it = 0; it < 200; ++it) {
    std::vector<uint8_t> bytes = original;
    const uint64_t at = std::uniform_int_distribution<uint64_t>(0, bytes.size() - 1)(rng);
    bytes[at] ^= 1;
    overwrite_file(path, bytes);
    auto report = verify_checkpoint(dir, {});
    ASSERT_TRUE(report.is_ok());
    ASSERT_FALSE(report->ok()) << "flip @" << at;
  }
  overwrite_file(path, original);
}

}  // namespace
}  // namespace ckpt
