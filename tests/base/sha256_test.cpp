// Our SHA-256 (state, padding, the SHA-NI kernels, two streams at a time) against OpenSSL's EVP
// digest as the reference, for every kernel this CPU can run.
#include "base/sha256.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/sha256_batch.h"
#include "base/sha256_blocks.h"
#include "base/sha256_ranges.h"
#include "tests/support/sha256_test_support.h"

namespace ckpt {
namespace {

using testing::random_bytes;
using testing::reference_hex;
using Sha256Kernels = testing::Sha256KernelTest;

TEST_P(Sha256Kernels, KnownAnswers) {
  EXPECT_EQ(sha256_hex(std::string()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the length no longer fits the first block, so padding takes a second one.
  EXPECT_EQ(sha256_hex(std::string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string thousand(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(thousand.data(), thousand.size());
  EXPECT_EQ(million.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_P(Sha256Kernels, EveryLengthAndSplitMatchesOpenSsl) {
  const std::vector<uint8_t> bytes = random_bytes(1000, 1);
  std::mt19937 rng(2);
  for (size_t n = 0; n <= bytes.size(); n += (n < 200 ? 1 : 37)) {
    const std::string want = reference_hex(bytes.data(), n);
    ASSERT_EQ(sha256_hex(bytes.data(), n), want) << n << " bytes in one update";
    Sha256 pieces;
    for (size_t at = 0; at < n;) {
      const size_t take = std::min<size_t>(n - at, rng() % 150);
      pieces.update(bytes.data() + at, take);
      at += take;
    }
    ASSERT_EQ(pieces.finish_hex(), want) << n << " bytes in random pieces";
  }
}

TEST_P(Sha256Kernels, TwoStreamsAtOnceMatchOneAtATime) {
  const std::vector<uint8_t> a = random_bytes(64 * 300 + 17, 3);
  const std::vector<uint8_t> b = random_bytes(64 * 200 + 41, 4);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    // Different buffered partial blocks, lengths and block counts on each side.
    Sha256 ha;
    Sha256 hb;
    size_t at_a = 0;
    size_t at_b = 0;
    while (at_a < a.size() || at_b < b.size()) {
      const size_t na = std::min<size_t>(a.size() - at_a, rng() % (trial % 2 ? 3000 : 200));
      const size_t nb = std::min<size_t>(b.size() - at_b, rng() % (trial % 3 ? 3000 : 70));
      sha256_update_two(ha, a.data() + at_a, na, hb, b.data() + at_b, nb);
      at_a += na;
      at_b += nb;
    }
    ASSERT_EQ(ha.finish_hex(), reference_hex(a.data(), a.size())) << "trial " << trial;
    ASSERT_EQ(hb.finish_hex(), reference_hex(b.data(), b.size())) << "trial " << trial;
  }
  // The same bytes into two hashers (a payload's hash beside the whole file's), and one hasher
  // passed as both (then in order).
  Sha256 left;
  Sha256 right;
  sha256_update_two(left, a.data(), a.size(), right, a.data(), a.size());
  EXPECT_EQ(left.finish_hex(), reference_hex(a.data(), a.size()));
  EXPECT_EQ(right.finish_hex(), reference_hex(a.data(), a.size()));
  Sha256 both;
  sha256_update_two(both, a.data(), 100, both, a.data() + 100, a.size() - 100);
  EXPECT_EQ(both.finish_hex(), reference_hex(a.data(), a.size()));
}

TEST_P(Sha256Kernels, BatchKeepsEachHashersOrderAcrossPairs) {
  const std::vector<uint8_t> bytes = random_bytes(1 << 20, 6);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    // Up to five hashers, each over its own range cut into pieces that are queued interleaved
    // with the others' and with runs in between.
    const size_t hashers = 1 + trial % 5;
    std::vector<std::unique_ptr<Sha256>> h;
    std::vector<size_t> begin(hashers);
    std::vector<size_t> end(hashers);
    std::vector<size_t> at(hashers);
    for (size_t i = 0; i < hashers; ++i) {
      h.push_back(std::make_unique<Sha256>());
      begin[i] = at[i] = rng() % (bytes.size() / 2);
      end[i] = begin[i] + rng() % (bytes.size() / 2);
    }
    Sha256Batch batch;
    for (bool left = true; left;) {
      left = false;
      for (int round = 0; round < 7; ++round) {
        const size_t i = rng() % hashers;
        const size_t n = std::min<size_t>(end[i] - at[i], rng() % (trial % 2 ? 300000 : 500));
        batch.add(*h[i], bytes.data() + at[i], n);
        at[i] += n;
      }
      batch.run();
      for (size_t i = 0; i < hashers; ++i) left |= at[i] < end[i];
    }
    for (size_t i = 0; i < hashers; ++i) {
      ASSERT_EQ(h[i]->finish_hex(), reference_hex(bytes.data() + begin[i], end[i] - begin[i]))
          << "trial " << trial << ", hasher " << i << " of " << hashers;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKernel, Sha256Kernels, ::testing::ValuesIn(testing::kEveryKernel),
                         testing::kernel_name);

TEST(Sha256KernelChoice, ShaExtensionsAreUsedExactlyWhenTheCpuHasThem) {
  EXPECT_EQ(active_sha256_kernel() == Sha256Kernel::kShaExtensions, cpu_has_sha_extensions());
  EXPECT_EQ(use_sha256_kernel(Sha256Kernel::kShaExtensions), cpu_has_sha_extensions());
  EXPECT_TRUE(use_sha256_kernel(Sha256Kernel::kOpenSsl));
  EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl);
  ASSERT_TRUE(select_sha256_kernel("auto").is_ok());
  EXPECT_EQ(active_sha256_kernel() == Sha256Kernel::kShaExtensions, cpu_has_sha_extensions());
}

// Ranges of different lengths (empty, under a block, many blocks) handed out two at a time each
// get their own digest; a range past the end gets the read error naming the source, and the
// ranges hashed beside it are unaffected.
TEST(Sha256Hex, ADigestSpelledInHexReadsBackAndAnythingElseIsRefused) {
  Sha256 hash;
  hash.update("abc", 3);
  const Sha256Digest digest = hash.finish();
  const std::string hex = digest_hex(digest);
  ASSERT_EQ(digest_from_hex(hex), std::optional<Sha256Digest>(digest));
  std::string upper = hex;
  upper[0] = 'B';  // "ba78..." spelled with a capital: not how this project writes digests
  for (const std::string& other : {upper, hex.substr(1), hex + "0", std::string(64, 'g'), std::string()})
    EXPECT_FALSE(digest_from_hex(other).has_value()) << other;
  // Every byte value at every position: a lowercase hex digit reads as its value, any other byte
  // (a NUL, a capital, a byte above 0x7f) refuses the whole digest.
  for (size_t at = 0; at < hex.size(); ++at) {
    for (int byte = 0; byte < 256; ++byte) {
      std::string other = hex;
      other[at] = static_cast<char>(byte);
      const bool digit = (byte >= '0' && byte <= '9') || (byte >= 'a' && byte <= 'f');
      const std::optional<Sha256Digest> read = digest_from_hex(other);
      ASSERT_EQ(read.has_value(), digit) << at << " " << byte;
      if (digit) {
        ASSERT_EQ(digest_hex(*read), other) << at << " " << byte;
      }
    }
  }

  // digest_is_hex: exactly digest_hex's spelling, checked without building it.
  EXPECT_TRUE(digest_is_hex(digest, hex));
  for (const std::string& other : {upper, hex.substr(1), hex + "0", std::string(64, 'g'), std::string()})
    EXPECT_FALSE(digest_is_hex(digest, other)) << other;
  for (size_t i = 0; i < hex.size(); ++i) {  // every digit, changed
    std::string one = hex;
    one[i] = one[i] == '0' ? '1' : '0';
    EXPECT_FALSE(digest_is_hex(digest, one)) << i;
  }
}

TEST(Sha256Ranges, EachRangeGetsItsOwnDigestOrError) {
  const std::vector<uint8_t> bytes = random_bytes(3 * kStreamBlockBytes + 123, 8);
  MemoryByteSource source(bytes, "shard.bin");
  struct Want {
    uint64_t offset;
    uint64_t length;
  };
  const std::vector<Want> wants = {{0, bytes.size()},       {7, 0}, {5, 100}, {64, 2 * kStreamBlockBytes + 1},
                                   {bytes.size() - 10, 20}, {1, 63}};
  std::vector<Result<std::string>> digests(wants.size(), Status::io_error("not hashed"));
  size_t next = 0;
  std::atomic<uint64_t> hashed{0};
  sha256_ranges_two_at_a_time(
      [&]() -> std::optional<RangeToHash> {
        if (next == wants.size()) return std::nullopt;
        const size_t i = next++;
        return RangeToHash{&source, wants[i].offset, wants[i].length, &digests[i]};
      },
      &hashed);
  uint64_t in_range = 0;
  for (size_t i = 0; i < wants.size(); ++i) {
    if (wants[i].offset + wants[i].length > bytes.size()) {
      ASSERT_FALSE(digests[i].is_ok()) << "range " << i;
      EXPECT_NE(digests[i].status().message().find("shard.bin"), std::string::npos)
          << digests[i].status().to_string();
      continue;
    }
    ASSERT_TRUE(digests[i].is_ok()) << "range " << i << ": " << digests[i].status().to_string();
    EXPECT_EQ(*digests[i], reference_hex(bytes.data() + wants[i].offset, wants[i].length)) << "range " << i;
    in_range += wants[i].length;
  }
  EXPECT_EQ(hashed.load(), in_range);
}

// A block of a checkpoint with thousands of small payloads gives a batch thousands of hashers,
// each with a piece or two; hashers also move between rounds and between two batches (a stale
// lane index must not send a piece to another hasher's lane).
TEST_P(Sha256Kernels, BatchOfThousandsOfSmallHashersAndStaleLanes) {
  const std::vector<uint8_t> bytes = random_bytes(1 << 16, 9);
  std::mt19937 rng(10);
  const size_t count = 3000;
  std::vector<std::unique_ptr<Sha256>> h;
  std::vector<std::string> fed(count);
  for (size_t i = 0; i < count; ++i) h.push_back(std::make_unique<Sha256>());
  Sha256Batch batches[2];
  for (int round = 0; round < 4; ++round) {
    Sha256Batch& batch = batches[round % 2];
    for (int k = 0; k < 5000; ++k) {
      const size_t i = (round % 2 ? count - 1 - k % count : rng() % count);  // reversed order, then random
      const size_t at = rng() % (bytes.size() - 200);
      const size_t n = rng() % 130;
      batch.add(*h[i], bytes.data() + at, n);
      fed[i].append(reinterpret_cast<const char*>(bytes.data() + at), n);
    }
    batch.run();
  }
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(h[i]->finish_hex(),
              reference_hex(reinterpret_cast<const uint8_t*>(fed[i].data()), fed[i].size()))
        << "hasher " << i;
  }
}

TEST(Sha256Streams, AJobRunsAloneOnlyWhenItWouldSetTheEnd) {
  EXPECT_TRUE(hashes_alone(100, 1000, 8));   // 100 x 1.5 x 8 workers > 1000: alone
  EXPECT_FALSE(hashes_alone(50, 1000, 8));   // a small share: paired
  EXPECT_TRUE(hashes_alone(1000, 1000, 1));  // the only job
  EXPECT_FALSE(hashes_alone(32, 2048, 2));   // the bench's 32 MiB units of 2 GiB on 2 cores
}

// A stream of `blocks` blocks that records how many streams were live while it read.
struct ProbeStream {
  ProbeStream(int blocks, bool alone, int& live, std::vector<int>& most_live)
      : blocks_(blocks), alone_(alone), live_(live), most_live_(most_live) {
    ++live_;
  }
  Status read(Sha256Batch& batch) {
    most_ = std::max(most_, live_);
    batch.add(hash_, "block", 5);
    ++read_;
    return Status::ok();
  }
  bool at_end() const { return read_ == blocks_; }
  bool alone() const { return alone_; }
  void settle() {}
  Status finish() { return Status::ok(); }
  void conclude(Status) {
    --live_;
    most_live_.push_back(alone_ ? -most_ : most_);
  }
  int blocks_;
  bool alone_;
  int& live_;
  std::vector<int>& most_live_;
  int read_ = 0;
  int most_ = 0;
  Sha256 hash_;
};

TEST(Sha256Streams, TwoAtATimeExceptAStreamThatRunsAlone) {
  int live = 0;
  std::vector<int> most_live;  // per stream in end order; negative: an alone stream
  // After the alone one: 3 and 5 together, then 4 beside the rest of 5, then 2 beside the rest of 4.
  const std::vector<std::pair<int, bool>> jobs = {{9, true}, {3, false}, {5, false}, {4, false}, {2, false}};
  size_t next = 0;
  run_two_streams_at_a_time<ProbeStream>([&]() -> std::unique_ptr<ProbeStream> {
    if (next == jobs.size()) return nullptr;
    const auto [blocks, alone] = jobs[next++];
    return std::make_unique<ProbeStream>(blocks, alone, live, most_live);
  });
  EXPECT_EQ(live, 0);
  ASSERT_EQ(most_live.size(), jobs.size());
  EXPECT_EQ(most_live.front(), -1);  // the alone stream ran by itself, and ended first
  for (size_t i = 1; i < most_live.size(); ++i) EXPECT_EQ(most_live[i], 2) << "stream " << i;
}

// The queue behind verify, seal verify and the loader: every job once, largest first (on one
// worker the order is exact), the one that would set the end marked alone.
TEST(Sha256Streams, HashingWorkersHandOutLargestFirstAndMarkWhatRunsAlone) {
  const std::vector<uint64_t> sizes = {5, 100, 7, 30, 7};
  std::vector<QueuedJob> handed;
  run_hashing_workers(sizes, 1,
                      [&](const NextQueuedJob& next) {
                        for (std::optional<QueuedJob> job; (job = next());) handed.push_back(*job);
                      },
                      {});
  ASSERT_EQ(handed.size(), sizes.size());
  const std::vector<size_t> want_order = {1, 3, 2, 4, 0};  // ties keep their order
  for (size_t i = 0; i < handed.size(); ++i) {
    EXPECT_EQ(handed[i].index, want_order[i]) << "position " << i;
    EXPECT_EQ(handed[i].alone, i == 0) << "position " << i;  // 100 x 1.5 > 149; 30 x 1.5 is not
  }
}

}  // namespace
}  // namespace ckpt
