// What the SHA-256 tests share: OpenSSL's EVP digest as the reference, seeded random bytes, and a
// fixture parameterised by kernel: each test runs on every kernel this CPU has (a kernel it lacks is
// skipped, saying so) and the automatic choice is restored afterwards.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/sha256_blocks.h"

namespace ckpt::testing {

inline std::string reference_hex(const uint8_t* data, size_t size) {
  uint8_t digest[32];
  unsigned int len = 0;
  EVP_Digest(data, size, digest, &len, EVP_sha256(), nullptr);
  return to_hex(digest, len);
}

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

class Sha256KernelTest : public ::testing::TestWithParam<Sha256Kernel> {
 protected:
  void SetUp() override {
    if (!use_sha256_kernel(GetParam()))
      GTEST_SKIP() << "this CPU has no SHA extensions; " << sha256_kernel_name(GetParam()) << " not run";
  }
  void TearDown() override { ASSERT_TRUE(select_sha256_kernel("auto").is_ok()); }
};

// For INSTANTIATE_TEST_SUITE_P(EveryKernel, Fixture, ::testing::ValuesIn(kEveryKernel), kernel_name).
inline const std::vector<Sha256Kernel> kEveryKernel = {Sha256Kernel::kShaExtensions, Sha256Kernel::kOpenSsl};
inline std::string kernel_name(const ::testing::TestParamInfo<Sha256Kernel>& info) {
  return info.param == Sha256Kernel::kShaExtensions ? "ShaExtensions" : "OpenSsl";
}

}  // namespace ckpt::testing
