// Why our own SHA-256 can be trusted on the signature path: each kernel proves itself with known
// answers before it is used (and a failing one is replaced by OpenSSL's, loudly), OpenSSL can be
// forced, inputs past 2^32 bits (the length's high word) agree with OpenSSL, and a hasher can
// never be queued in two batches at once (which could hash its bytes out of order).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/sha256_batch.h"
#include "base/sha256_blocks.h"
#include "tests/support/sha256_test_support.h"

namespace ckpt {
namespace {

using testing::random_bytes;
using testing::reference_hex;

const std::string kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const char* const kWarningStart = "ckptcheck: warning: SHA-NI SHA-256 kernel failed its self-test (";
const char* const kWarningEnd = "); using OpenSSL\n";

size_t count_lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// Sets (or unsets, for null) an environment variable for one test, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_ ? old_->c_str() : nullptr); }
  void set(const char* value) {
    if (value) {
      ::setenv(name_, value, 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Every test here changes the process-wide choice; each leaves the automatic one behind, with no
// simulated fault, as the other tests expect.
class Sha256KernelTrust : public ::testing::Test {
 protected:
  void TearDown() override {
    set_sha256_self_test_fault_for_testing(false);
    ASSERT_TRUE(select_sha256_kernel("auto").is_ok());
  }
};

// ---- known-answer self-test ----

TEST_F(Sha256KernelTrust, EveryKernelTheCpuHasPassesItsSelfTest) {
  // OpenSSL's passing also vouches for the self-test's own expected digests.
  const Status openssl = sha256_kernel_self_test(Sha256Kernel::kOpenSsl);
  EXPECT_TRUE(openssl.is_ok()) << openssl.to_string();
  const Status sha_ni = sha256_kernel_self_test(Sha256Kernel::kShaExtensions);
  if (cpu_has_sha_extensions()) {
    EXPECT_TRUE(sha_ni.is_ok()) << sha_ni.to_string();
  } else {
    EXPECT_EQ(sha_ni.code(), StatusCode::kNotSupported) << sha_ni.to_string();
  }
}

TEST_F(Sha256KernelTrust, SelfTestCatchesAFaultyKernelAndSaysWhere) {
  if (!cpu_has_sha_extensions()) GTEST_SKIP() << "this CPU has no SHA extensions";
  set_sha256_self_test_fault_for_testing(true);
  const Status failed = sha256_kernel_self_test(Sha256Kernel::kShaExtensions);
  ASSERT_FALSE(failed.is_ok());
  // The first vector, one stream: the kernel, the path, the vector, both digests.
  EXPECT_NE(failed.message().find("sha-extensions-x2, one stream, empty: got "), std::string::npos)
      << failed.message();
  EXPECT_NE(
      failed.message().find("expected e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
      std::string::npos)
      << failed.message();
  // The fault is the SHA-NI kernel's alone.
  EXPECT_TRUE(sha256_kernel_self_test(Sha256Kernel::kOpenSsl).is_ok());
}

// A failing self-test at the automatic choice: OpenSSL's kernel, one warning however often the
// choice is made again (the result is kept), digests still right; once the kernel passes again,
// SHA-NI comes back without a word.
TEST_F(Sha256KernelTrust, FailedSelfTestFallsBackToOpenSslWithOneWarning) {
  if (!cpu_has_sha_extensions()) {
    ASSERT_TRUE(select_sha256_kernel("auto").is_ok());
    EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl);
    EXPECT_STREQ(active_sha256_kernel_description(), "openssl (CPU has no SHA extensions)");
    GTEST_SKIP() << "this CPU has no SHA extensions: no self-test to fail";
  }
  set_sha256_self_test_fault_for_testing(true);
  ::testing::internal::CaptureStderr();
  const Status first = select_sha256_kernel("auto");
  const Status again = select_sha256_kernel("auto");
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(first.is_ok()) << first.to_string();
  ASSERT_TRUE(again.is_ok()) << again.to_string();
  EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl);
  EXPECT_STREQ(active_sha256_kernel_description(), "openssl (SHA-NI self-test failed)");
  EXPECT_EQ(count_lines(printed), 1u) << printed;
  EXPECT_EQ(printed.rfind(kWarningStart, 0), 0u) << printed;
  ASSERT_GE(printed.size(), std::string(kWarningEnd).size());
  EXPECT_EQ(printed.substr(printed.size() - std::string(kWarningEnd).size()), kWarningEnd) << printed;
  EXPECT_EQ(sha256_hex(std::string("abc")), kAbc);

  set_sha256_self_test_fault_for_testing(false);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(select_sha256_kernel("auto").is_ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kShaExtensions);
  EXPECT_STREQ(active_sha256_kernel_description(), "sha-extensions-x2 (self-test passed)");
}

// The first use of a kernel in a fresh process (a re-executed child: this process has chosen long
// ago) makes the choice itself: a failing self-test there ends in OpenSSL's kernel and the
// warning, before the first digest, which is still right.
TEST(Sha256KernelTrustDeathTest, FailedSelfTestAtFirstUseFallsBackToOpenSsl) {
  if (!cpu_has_sha_extensions()) GTEST_SKIP() << "this CPU has no SHA extensions";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ScopedEnv env("CKPTCHECK_SHA256", nullptr);
  EXPECT_EXIT(
      {
        set_sha256_self_test_fault_for_testing(true);
        const bool right = sha256_hex(std::string("abc")) == kAbc;
        const bool openssl = active_sha256_kernel() == Sha256Kernel::kOpenSsl;
        std::fprintf(stderr, "[%s]\n", active_sha256_kernel_description());
        std::exit(right && openssl ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "^ckptcheck: warning: SHA-NI SHA-256 kernel failed its self-test \\(sha-extensions-x2, one stream, "
      "empty: "
      "got [0-9a-f]{64}, expected [0-9a-f]{64}\\); using OpenSSL\n\\[openssl \\(SHA-NI self-test "
      "failed\\)\\]\n$");
}

TEST(Sha256KernelTrustDeathTest, FirstUseReadsTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  {
    ScopedEnv env("CKPTCHECK_SHA256", "openssl");
    EXPECT_EXIT(
        {
          const bool openssl = active_sha256_kernel() == Sha256Kernel::kOpenSsl;
          std::fprintf(stderr, "[%s]\n", active_sha256_kernel_description());
          std::exit(openssl && sha256_hex(std::string("abc")) == kAbc ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "^\\[openssl \\(forced by CKPTCHECK_SHA256\\)\\]\n$");
  }
  {
    // Not understood, and no one called configure_sha256_kernel_from_env to refuse it: the
    // reference code, and an error line.
    ScopedEnv env("CKPTCHECK_SHA256", "sha-ni");
    EXPECT_EXIT(
        {
          const bool openssl = active_sha256_kernel() == Sha256Kernel::kOpenSsl;
          std::fprintf(stderr, "[%s]\n", active_sha256_kernel_description());
          std::exit(openssl ? 0 : 1);
        },
        ::testing::ExitedWithCode(0),
        "^ckptcheck: error: CKPTCHECK_SHA256=\"sha-ni\": not a SHA-256 kernel choice \\(expected openssl, "
        "auto "
        "or empty\\); using OpenSSL\n\\[openssl \\(CKPTCHECK_SHA256 not understood\\)\\]\n$");
  }
  if (cpu_has_sha_extensions()) {
    ScopedEnv env("CKPTCHECK_SHA256", "auto");
    EXPECT_EXIT(
        {
          std::fprintf(stderr, "[%s]\n", active_sha256_kernel_description());
          std::exit(active_sha256_kernel() == Sha256Kernel::kShaExtensions ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "^\\[sha-extensions-x2 \\(self-test passed\\)\\]\n$");
  }
}

// ---- forcing OpenSSL ----

TEST_F(Sha256KernelTrust, EnvironmentForcesOpenSslOrIsRefused) {
  ScopedEnv env("CKPTCHECK_SHA256", "openssl");
  ASSERT_TRUE(configure_sha256_kernel_from_env().is_ok());
  EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl);
  EXPECT_STREQ(active_sha256_kernel_description(), "openssl (forced by CKPTCHECK_SHA256)");
  EXPECT_EQ(sha256_hex(std::string("abc")), kAbc);

  // Refused, and the choice before it stands.
  for (const char* bad : {"sha-ni", "OpenSSL", "auto ", "1"}) {
    env.set(bad);
    const Status refused = configure_sha256_kernel_from_env();
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(refused.message(), "CKPTCHECK_SHA256=\"" + std::string(bad) +
                                     "\": not a SHA-256 kernel choice (expected openssl, auto or empty)");
    EXPECT_STREQ(active_sha256_kernel_description(), "openssl (forced by CKPTCHECK_SHA256)") << bad;
  }

  const Sha256Kernel automatic =
      cpu_has_sha_extensions() ? Sha256Kernel::kShaExtensions : Sha256Kernel::kOpenSsl;
  for (const char* as_auto : {"auto", "", static_cast<const char*>(nullptr)}) {
    env.set("openssl");
    ASSERT_TRUE(configure_sha256_kernel_from_env().is_ok());
    env.set(as_auto);
    ASSERT_TRUE(configure_sha256_kernel_from_env().is_ok()) << (as_auto ? as_auto : "unset");
    EXPECT_EQ(active_sha256_kernel(), automatic) << (as_auto ? as_auto : "unset");
  }
}

TEST_F(Sha256KernelTrust, SelectByNameForTheCommandLine) {
  ASSERT_TRUE(select_sha256_kernel("openssl").is_ok());
  EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl);
  EXPECT_STREQ(active_sha256_kernel_description(), "openssl (forced by --sha256 openssl)");
  EXPECT_EQ(sha256_hex(std::string("abc")), kAbc);

  for (const char* bad : {"", "sha-ni", "sha-extensions-x2", "Auto"}) {
    const Status refused = select_sha256_kernel(bad);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.message().find("expected openssl or auto"), std::string::npos) << refused.message();
    EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl) << bad;
  }

  ASSERT_TRUE(select_sha256_kernel("auto").is_ok());
  if (cpu_has_sha_extensions()) {
    EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kShaExtensions);
    EXPECT_STREQ(active_sha256_kernel_description(), "sha-extensions-x2 (self-test passed)");
  } else {
    EXPECT_EQ(active_sha256_kernel(), Sha256Kernel::kOpenSsl);
    EXPECT_STREQ(active_sha256_kernel_description(), "openssl (CPU has no SHA extensions)");
  }
}

// ---- more than 2^32 bits of input ----

using Sha256KernelsPastTwoTo32Bits = testing::Sha256KernelTest;

// Deliberately large (513 MiB per stream, about a second per kernel): SHA-256 ends every message
// with its length in bits as a 64-bit word, and only a message of more than 2^32 bits (512 MiB)
// makes that word's high half non-zero, which the smaller tests never reach. The input is a
// generated pattern streamed through one reused 1 MiB buffer (each chunk stamped with its index,
// so no two are alike); one stream, and two streams at once with different alignments, against
// OpenSSL's EVP fed the same bytes.
TEST_P(Sha256KernelsPastTwoTo32Bits, HashesOf513MiBMatchOpenSsl) {
  constexpr size_t kChunk = size_t{1} << 20;
  constexpr size_t kChunks = 513;
  static_assert(uint64_t{kChunk} * kChunks * 8 > (uint64_t{1} << 32), "the length's high word must be used");
  std::vector<uint8_t> chunk = random_bytes(kChunk, 11);
  // The second stream starts with 7 bytes of its own, so its blocks never line up with the first's
  // and every update goes through its partial block.
  const uint8_t prefix[7] = {1, 2, 3, 4, 5, 6, 7};

  using EvpContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
  EvpContext ref_a(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EvpContext ref_b(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  ASSERT_TRUE(EVP_DigestInit_ex(ref_a.get(), EVP_sha256(), nullptr));
  ASSERT_TRUE(EVP_DigestInit_ex(ref_b.get(), EVP_sha256(), nullptr));
  ASSERT_TRUE(EVP_DigestUpdate(ref_b.get(), prefix, sizeof(prefix)));

  Sha256 one;
  Sha256 two_a;
  Sha256 two_b;
  two_b.update(prefix, sizeof(prefix));
  for (size_t i = 0; i < kChunks; ++i) {
    for (size_t k = 0; k < 8; ++k) chunk[k] = static_cast<uint8_t>(i >> (8 * k));
    one.update(chunk.data(), chunk.size());
    sha256_update_two(two_a, chunk.data(), chunk.size(), two_b, chunk.data(), chunk.size());
    ASSERT_TRUE(EVP_DigestUpdate(ref_a.get(), chunk.data(), chunk.size()));
    ASSERT_TRUE(EVP_DigestUpdate(ref_b.get(), chunk.data(), chunk.size()));
  }
  uint8_t digest[32];
  unsigned int len = 0;
  ASSERT_TRUE(EVP_DigestFinal_ex(ref_a.get(), digest, &len));
  const std::string want_a = to_hex(digest, len);
  ASSERT_TRUE(EVP_DigestFinal_ex(ref_b.get(), digest, &len));
  const std::string want_b = to_hex(digest, len);
  EXPECT_EQ(one.finish_hex(), want_a) << "one stream";
  EXPECT_EQ(two_a.finish_hex(), want_a) << "two streams, first";
  EXPECT_EQ(two_b.finish_hex(), want_b) << "two streams, second (misaligned by 7 bytes)";
}

INSTANTIATE_TEST_SUITE_P(EveryKernel, Sha256KernelsPastTwoTo32Bits,
                         ::testing::ValuesIn(testing::kEveryKernel), testing::kernel_name);

// ---- one hasher, one batch at a time ----

// What used to corrupt the lane bookkeeping: `h` in lane 1 of batch A, then in lane 0 of batch B
// (its remembered lane now says 0), then in A again, where lane 0 is another hasher's, so A gave
// `h` a second lane and hashed the two lanes' bytes interleaved. Now B refuses `h` while A owes it
// bytes, queues nothing, and both batches give the right digests.
TEST(Sha256BatchOwnership, AHasherQueuedInABatchIsRefusedByAnother) {
  const std::vector<uint8_t> bytes = random_bytes(10000, 12);
  const uint8_t* p = bytes.data();
  Sha256 g;
  Sha256 h;
  Sha256 other;
  Sha256Batch a;
  Sha256Batch b;
  a.add(g, p, 100);
  a.add(h, p + 100, 3000);
  EXPECT_TRUE(h.queued_in_batch());
  EXPECT_THROW(b.add(h, p + 3100, 500), std::logic_error);
  b.add(other, p, 700);  // the refusal left b working
  a.add(h, p + 3100, 900);
  a.add(g, p + 100, 50);
  b.run();
  EXPECT_TRUE(h.queued_in_batch());  // b's run does not release a's hashers
  a.run();
  EXPECT_FALSE(h.queued_in_batch());
  b.add(h, p + 4000, 6000);  // a ran: h is free for b
  b.run();
  EXPECT_EQ(g.finish_hex(), reference_hex(p, 150));
  EXPECT_EQ(h.finish_hex(), reference_hex(p + 100, 9900));
  EXPECT_EQ(other.finish_hex(), reference_hex(p, 700));
}

// Updating or finishing a hasher directly while a batch owes it bytes would put them out of order.
TEST(Sha256BatchOwnership, AQueuedHasherRefusesDirectUpdatesUntilTheBatchRuns) {
  const std::vector<uint8_t> bytes = random_bytes(5000, 13);
  Sha256 h;
  Sha256 partner;
  Sha256Batch batch;
  batch.add(h, bytes.data(), 2000);
  EXPECT_THROW(h.update(bytes.data() + 2000, 10), std::logic_error);
  EXPECT_THROW(sha256_update_two(partner, bytes.data(), 10, h, bytes.data() + 2000, 10), std::logic_error);
  EXPECT_THROW(h.finish(), std::logic_error);
  batch.add(h, bytes.data() + 2000, 0);  // an empty piece queues nothing, here or anywhere
  batch.run();
  h.update(bytes.data() + 2000, 3000);
  EXPECT_EQ(h.finish_hex(), reference_hex(bytes.data(), 5000));
  // The refused call hashed nothing into either.
  EXPECT_EQ(partner.finish_hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// A batch destroyed before it ran leaves its hashers short of bytes: they refuse to give a digest.
TEST(Sha256BatchOwnership, AHasherWhoseBatchWasDroppedUnrunRefusesToFinish) {
  const std::vector<uint8_t> bytes = random_bytes(1000, 14);
  Sha256 h;
  Sha256 untouched;
  {
    Sha256Batch batch;
    batch.add(h, bytes.data(), 1000);
  }
  EXPECT_FALSE(h.queued_in_batch());
  EXPECT_THROW(h.finish(), std::logic_error);
  EXPECT_THROW(h.update(bytes.data(), 1), std::logic_error);
  Sha256Batch next;
  EXPECT_THROW(next.add(h, bytes.data(), 1), std::logic_error);
  next.add(untouched, bytes.data(), 1000);
  next.run();
  EXPECT_EQ(untouched.finish_hex(), reference_hex(bytes.data(), 1000));
}

}  // namespace
}  // namespace ckpt
