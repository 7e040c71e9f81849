#include "base/crc32.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace ckpt {
namespace {

TEST(Crc32, CheckValueOfTheStandard) {
  const char* text = "123456789";
  EXPECT_EQ(crc32_update(0, reinterpret_cast<const uint8_t*>(text), 9), 0xcbf43926u);
  EXPECT_EQ(crc32_update_portable(0, reinterpret_cast<const uint8_t*>(text), 9), 0xcbf43926u);
  EXPECT_EQ(crc32_update(0, nullptr, 0), 0u);
}

// The folding path (64 bytes and up) must agree with the tables for every length around its
// block sizes, at any alignment, and when the input arrives in pieces.
TEST(Crc32, FastPathAgreesWithTablesForEveryLengthAlignmentAndSplit) {
  std::mt19937 rng(19);
  std::vector<uint8_t> data(4096 + 64);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t offset : {0, 1, 7, 15}) {
    for (size_t n = 0; n <= 600; ++n) {
      ASSERT_EQ(crc32_update(0, data.data() + offset, n), crc32_update_portable(0, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
    const size_t n = 4096;
    ASSERT_EQ(crc32_update(0x12345678u, data.data() + offset, n),
              crc32_update_portable(0x12345678u, data.data() + offset, n));
  }
  const uint32_t whole = crc32_update_portable(0, data.data(), 4096);
  for (size_t split : {1, 63, 64, 65, 100, 2000, 4095}) {
    const uint32_t first = crc32_update(0, data.data(), split);
    EXPECT_EQ(crc32_update(first, data.data() + split, 4096 - split), whole) << "split " << split;
  }
  std::vector<uint8_t> zeros(1000, 0), ones(1000, 0xff);
  EXPECT_EQ(crc32_update(0, zeros.data(), zeros.size()),
            crc32_update_portable(0, zeros.data(), zeros.size()));
  EXPECT_EQ(crc32_update(0, ones.data(), ones.size()), crc32_update_portable(0, ones.data(), ones.size()));
}

}  // namespace
}  // namespace ckpt
