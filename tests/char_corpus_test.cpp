#include "fixtures/char_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ckpt {
namespace {

TEST(CharCorpus, VocabIsSortedUniqueBytesAndSplitTakesTheTail) {
  CharCorpus c = CharCorpus::from_bytes("banana bread", 0.25);  // 12 bytes -> 3 eval
  std::vector<uint8_t> expected_vocab = {' ', 'a', 'b', 'd', 'e', 'n', 'r'};
  EXPECT_EQ(c.vocab(), expected_vocab);
  // b=2 a=1 n=5 a n a ' '=0 b r=6 | e=4 a d=3
  EXPECT_EQ(c.train_ids(), (std::vector<int64_t>{2, 1, 5, 1, 5, 1, 0, 2, 6}));
  EXPECT_EQ(c.eval_ids(), (std::vector<int64_t>{4, 1, 3}));
}

TEST(CharCorpus, SplitAndWindowCounts) {
  CorpusSplit s = split_corpus(35149, 0.1);
  EXPECT_EQ(s.eval_tokens, 3514);
  EXPECT_EQ(s.train_tokens, 31635);
  EXPECT_EQ(window_count(31635, 64), 486);  // 486 * 65 = 31590
  EXPECT_EQ(window_count(64, 64), 0);
  EXPECT_EQ(window_count(65, 64), 1);
}

TEST(CharCorpus, LoadChecksTheHash) {
  const std::string path = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/data/corpus.txt";
  Result<CharCorpus> c =
      CharCorpus::load(path, 0.1, "3972dc9744f6499f0f9b2dbf76696f2ae7ad8af9b23dde66d6af86c9dfb36986");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->train_ids().size() + c->eval_ids().size(), 35149u);
  Result<CharCorpus> bad = CharCorpus::load(path, 0.1, std::string(64, '0'));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("data.sha256: expected 000"), std::string::npos);
}

TEST(EpochPermutation, IsAPermutationFixedBySeedAndEpoch) {
  std::vector<int64_t> a = epoch_permutation(100, 1234, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_EQ(a, epoch_permutation(100, 1234, 0));
  EXPECT_NE(a, epoch_permutation(100, 1234, 1));
  EXPECT_NE(a, epoch_permutation(100, 1235, 0));
}

TEST(EpochPermutation, MatchesHandRunFisherYates) {
  // Recompute the 4-element shuffle by hand from the same engine.
  std::seed_seq seq{7u, 0u, 2u, 0u};
  std::mt19937_64 rng(seq);
  std::vector<int64_t> expected = {0, 1, 2, 3};
  for (size_t i = 4; i > 1; --i) std::swap(expected[i - 1], expected[rng() % i]);
  EXPECT_EQ(epoch_permutation(4, 7, 2), expected);
}

TEST(ShuffledWindows, WalksThePermutationAndWrapsIntoTheNextEpoch) {
  const int64_t seq_len = 4;  // windows of 5 tokens
  ShuffledWindows w(3, seq_len, DataCursor{0, 0, 99});
  std::vector<int64_t> e0 = epoch_permutation(3, 99, 0), e1 = epoch_permutation(3, 99, 1);
  EXPECT_EQ(w.next_batch(2), (std::vector<int64_t>{e0[0] * 5, e0[1] * 5}));
  EXPECT_EQ(w.position().cursor, 2);
  EXPECT_EQ(w.next_batch(2), (std::vector<int64_t>{e0[2] * 5, e1[0] * 5}));
  EXPECT_EQ(w.position().epoch, 1);
  EXPECT_EQ(w.position().cursor, 1);
  // A fresh sampler seeked to the saved position continues identically.
  ShuffledWindows resumed(3, seq_len, DataCursor{0, 0, 99});
  ASSERT_TRUE(resumed.seek(w.position()).is_ok());
  EXPECT_EQ(resumed.next_batch(4), w.next_batch(4));
}

TEST(ShuffledWindows, SeekRejectsCursorOutOfRange) {
  ShuffledWindows w(3, 4, DataCursor{0, 0, 1});
  Status s = w.seek(DataCursor{0, 4, 1});
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("data.cursor"), std::string::npos);
  EXPECT_EQ(w.position().cursor, 0);
}

}  // namespace
}  // namespace ckpt
