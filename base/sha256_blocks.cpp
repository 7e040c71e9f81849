#include "base/sha256_blocks.h"

// OpenSSL's low-level SHA256_* calls, which work on a caller-held state, are deprecated in 3.0 in
// favour of EVP, which hides the state we need to interleave two streams.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define CKPT_SHA_X86 1
#endif

namespace ckpt {

namespace {

// With nothing buffered and whole blocks, SHA256_Update hands them all to OpenSSL's block function
// in one call (its AVX2 code works on two blocks at a time) and buffers nothing; its length count,
// which only its own SHA256_Final would read, is ignored.
void openssl_blocks(uint32_t state[8], const uint8_t* data, size_t blocks) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  static_assert(sizeof(ctx.h) == 8 * sizeof(uint32_t), "OpenSSL's SHA-256 state is eight 32-bit words");
  std::memcpy(ctx.h, state, sizeof(ctx.h));
  SHA256_Update(&ctx, data, 64 * blocks);
  std::memcpy(state, ctx.h, sizeof(ctx.h));
}

#ifdef CKPT_SHA_X86

#define CKPT_SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))
#define CKPT_SHA_INLINE CKPT_SHA_TARGET __attribute__((always_inline)) inline

alignas(16) const uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// sha256rnds2 wants the state as ABEF and CDGH word pairs.
struct ShaLanes {
  __m128i abef;
  __m128i cdgh;
};

CKPT_SHA_INLINE ShaLanes load_lanes(const uint32_t* state) {
  const __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1);
  const __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);
  return {_mm_alignr_epi8(dcba, efgh, 8), _mm_blend_epi16(efgh, dcba, 0xF0)};
}

CKPT_SHA_INLINE void store_lanes(uint32_t* state, ShaLanes lanes) {
  const __m128i feba = _mm_shuffle_epi32(lanes.abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(lanes.cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}

// Message words 4g..4g+3 from the block (g < 4), big-endian.
CKPT_SHA_INLINE __m128i load_words(const uint8_t* block, int g) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * g)), byte_swap);
}

// Message words 4g..4g+3 (g >= 4) from the four groups before them, oldest first.
CKPT_SHA_INLINE __m128i schedule(__m128i w0, __m128i w1, __m128i w2, __m128i w3) {
  return _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4)), w3);
}

// Rounds 4g..4g+3.
CKPT_SHA_INLINE void rounds(ShaLanes& s, __m128i words, int g) {
  const __m128i wk =
      _mm_add_epi32(words, _mm_load_si128(reinterpret_cast<const __m128i*>(&kRoundConstants[4 * g])));
  s.cdgh = _mm_sha256rnds2_epu32(s.cdgh, s.abef, wk);
  s.abef = _mm_sha256rnds2_epu32(s.abef, s.cdgh, _mm_shuffle_epi32(wk, 0x0E));
}

CKPT_SHA_INLINE void add_lanes(ShaLanes& s, const ShaLanes& before) {
  s.abef = _mm_add_epi32(s.abef, before.abef);
  s.cdgh = _mm_add_epi32(s.cdgh, before.cdgh);
}

// Compresses `blocks` blocks of each of N independent streams, every step done for each stream in
// turn: with N = 2 the compiler keeps both in the 16 XMM registers the SHA instructions can
// address, and the CPU overlaps the two streams' sha256rnds2 latencies.
template <int N>
CKPT_SHA_INLINE void sha_ni_streams(uint32_t* const state[N], const uint8_t* const data[N], size_t blocks) {
  ShaLanes s[N];
  const uint8_t* p[N];
#pragma GCC unroll 2
  for (int i = 0; i < N; ++i) {
    s[i] = load_lanes(state[i]);
    p[i] = data[i];
  }
  for (; blocks; --blocks) {
    ShaLanes before[N];
    __m128i w[N][4];
#pragma GCC unroll 2
    for (int i = 0; i < N; ++i) before[i] = s[i];
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) {
        w[i][g & 3] = g < 4 ? load_words(p[i], g)
                            : schedule(w[i][g & 3], w[i][(g + 1) & 3], w[i][(g + 2) & 3], w[i][(g + 3) & 3]);
      }
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) rounds(s[i], w[i][g & 3], g);
    }
#pragma GCC unroll 2
    for (int i = 0; i < N; ++i) {
      add_lanes(s[i], before[i]);
      p[i] += 64;
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < N; ++i) store_lanes(state[i], s[i]);
}

CKPT_SHA_TARGET void sha_ni_blocks(uint32_t state[8], const uint8_t* data, size_t blocks) {
  uint32_t* const states[1] = {state};
  const uint8_t* const datas[1] = {data};
  sha_ni_streams<1>(states, datas, blocks);
}

CKPT_SHA_TARGET void sha_ni_blocks_two(uint32_t state_a[8], const uint8_t* a, uint32_t state_b[8],
                                       const uint8_t* b, size_t blocks) {
  uint32_t* const states[2] = {state_a, state_b};
  const uint8_t* const datas[2] = {a, b};
  sha_ni_streams<2>(states, datas, blocks);
}

bool detect_sha_extensions() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool ssse3 = ecx & (1u << 9);
  const bool sse41 = ecx & (1u << 19);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool sha = ebx & (1u << 29);
  return ssse3 && sse41 && sha;
}

#else

bool detect_sha_extensions() {
  return false;
}

#endif

// The compression functions of one kernel, whichever is active: the self-test must exercise the
// kernel it was asked about, not the one in use.
void kernel_blocks(Sha256Kernel kernel, uint32_t state[8], const uint8_t* data, size_t blocks) {
#ifdef CKPT_SHA_X86
  if (kernel == Sha256Kernel::kShaExtensions) return sha_ni_blocks(state, data, blocks);
#endif
  (void)kernel;
  openssl_blocks(state, data, blocks);
}

void kernel_blocks_two(Sha256Kernel kernel, uint32_t state_a[8], const uint8_t* data_a, uint32_t state_b[8],
                       const uint8_t* data_b, size_t blocks) {
#ifdef CKPT_SHA_X86
  if (kernel == Sha256Kernel::kShaExtensions)
    return sha_ni_blocks_two(state_a, data_a, state_b, data_b, blocks);
#endif
  kernel_blocks(kernel, state_a, data_a, blocks);
  kernel_blocks(kernel, state_b, data_b, blocks);
}

// ---- known-answer self-test ----------------------------------------------------------------

// A message, padded as FIPS 180-4 says, and the digest it must have.
struct KnownAnswer {
  const char* name;
  std::vector<uint8_t> padded;  // whole blocks
  const char* digest_hex;
};

std::vector<uint8_t> pad_message(const std::vector<uint8_t>& message) {
  std::vector<uint8_t> padded(message);
  padded.push_back(0x80);
  while (padded.size() % 64 != 56) padded.push_back(0);
  const uint64_t bits = static_cast<uint64_t>(message.size()) * 8;
  for (int i = 0; i < 8; ++i) padded.push_back(static_cast<uint8_t>(bits >> (56 - 8 * i)));
  return padded;
}

std::vector<uint8_t> text_bytes(const char* text) {
  return std::vector<uint8_t>(text, text + std::strlen(text));
}

// FIPS 180-2's SHA-256 examples (one block; two, because the length no longer fits the first),
// its 112-byte SHA-512 example (two blocks with the padding; its SHA-256 is published too), and two
// generated patterns of 17 and 16 padded blocks, so that the two-stream kernel runs many blocks
// in both lanes with different data in each. The patterns' digests are Python hashlib's (and
// OpenSSL's kernel passes: Sha256KernelTrust.EveryKernelTheCpuHasPassesItsSelfTest).
const std::vector<KnownAnswer>& known_answers() {
  static const std::vector<KnownAnswer> answers = [] {
    std::vector<uint8_t> pattern_a(1024);
    for (uint32_t i = 0; i < pattern_a.size(); ++i) pattern_a[i] = static_cast<uint8_t>(i * 251 + (i >> 8));
    std::vector<uint8_t> pattern_b(1000);
    for (uint32_t i = 0; i < pattern_b.size(); ++i) pattern_b[i] = static_cast<uint8_t>(i * i + 0x5a);
    return std::vector<KnownAnswer>{
        {"empty", pad_message({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"\"abc\"", pad_message(text_bytes("abc")),
         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"FIPS 56-byte message",
         pad_message(text_bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"FIPS 112-byte message",
         pad_message(text_bytes(
             "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmno"
             "pqrlmnopqrsmnopqrstnopqrstu")),
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        {"1024-byte pattern", pad_message(pattern_a),
         "52b6f815d4abeeb6857b5e4b2b065f7403743db5534906048d4c2af243ff6b4f"},
        {"1000-byte pattern", pad_message(pattern_b),
         "26cdd151783ff293826cc51da23546f46efe4b084038cef85be65414329d569b"},
    };
  }();
  return answers;
}

std::atomic<bool>& self_test_fault() {
  static std::atomic<bool> fault{false};
  return fault;
}

std::string state_hex(const uint32_t state[8], bool flip_a_bit) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(state[i] >> shift) & 0xf];
  }
  if (flip_a_bit) out[0] = kHex[(std::strchr(kHex, out[0]) - kHex) ^ 1];
  return out;
}

// One line, for the warning: the kernel, the path and vector that failed, both digests in full.
Status mismatch(Sha256Kernel kernel, const std::string& where, const std::string& got, const char* want) {
  return Status::corruption(std::string(sha256_kernel_name(kernel)) + ", " + where + ": got " + got +
                            ", expected " + want);
}

// ---- which kernel is active, and why ---------------------------------------------------------

enum class KernelReason {
  kSelfTestPassed,
  kNoShaExtensions,
  kSelfTestFailed,
  kForcedByEnvironment,
  kForcedBySelection,
  kEnvironmentNotUnderstood,
  kSetForTesting,
};

constexpr const char* kEnvironmentVariable = "CKPTCHECK_SHA256";

const char* describe(Sha256Kernel kernel, KernelReason reason) {
  switch (reason) {
    case KernelReason::kSelfTestPassed: return "sha-extensions-x2 (self-test passed)";
    case KernelReason::kNoShaExtensions: return "openssl (CPU has no SHA extensions)";
    case KernelReason::kSelfTestFailed: return "openssl (SHA-NI self-test failed)";
    case KernelReason::kForcedByEnvironment: return "openssl (forced by CKPTCHECK_SHA256)";
    case KernelReason::kForcedBySelection: return "openssl (forced by --sha256 openssl)";
    case KernelReason::kEnvironmentNotUnderstood: return "openssl (CKPTCHECK_SHA256 not understood)";
    case KernelReason::kSetForTesting:
      return kernel == Sha256Kernel::kShaExtensions
                 ? "sha-extensions-x2 (chosen by a test, self-test not run)"
                 : "openssl (chosen by a test)";
  }
  return "unknown";
}

// Hashing reads only the atomics (one load each per call); choosing takes the mutex, so the first
// use from several threads at once picks, self-tests and warns once. Never destroyed: a static
// destructor elsewhere may still hash.
struct KernelChoice {
  std::mutex mutex;
  std::atomic<bool> chosen{false};
  std::atomic<Sha256Kernel> kernel{Sha256Kernel::kOpenSsl};
  std::atomic<KernelReason> reason{KernelReason::kNoShaExtensions};
  // The SHA-NI self-test's result, once run (under mutex): it cannot change within a process, and
  // caching it keeps its warning to one line however often the choice is made (env, then flag).
  std::optional<Status> sha_ni_self_test;
};

KernelChoice& kernel_choice() {
  static KernelChoice* choice = new KernelChoice;
  return *choice;
}

void set_choice_locked(KernelChoice& c, Sha256Kernel kernel, KernelReason reason) {
  c.kernel.store(kernel, std::memory_order_relaxed);
  c.reason.store(reason, std::memory_order_relaxed);
  c.chosen.store(true, std::memory_order_release);
}

// SHA-NI when the CPU has it and it passes its self-test, else OpenSSL's.
void choose_automatically_locked(KernelChoice& c) {
  if (!cpu_has_sha_extensions())
    return set_choice_locked(c, Sha256Kernel::kOpenSsl, KernelReason::kNoShaExtensions);
  if (!c.sha_ni_self_test) {
    c.sha_ni_self_test = sha256_kernel_self_test(Sha256Kernel::kShaExtensions);
    if (!c.sha_ni_self_test->is_ok()) {
      std::fprintf(stderr,
                   "ckptcheck: warning: SHA-NI SHA-256 kernel failed its self-test (%s); using OpenSSL\n",
                   c.sha_ni_self_test->message().c_str());
    }
  }
  if (c.sha_ni_self_test->is_ok()) {
    set_choice_locked(c, Sha256Kernel::kShaExtensions, KernelReason::kSelfTestPassed);
  } else {
    set_choice_locked(c, Sha256Kernel::kOpenSsl, KernelReason::kSelfTestFailed);
  }
}

enum class KernelRequest { kAuto, kOpenSsl, kNotUnderstood };

KernelRequest environment_request(std::string* value_out) {
  const char* value = std::getenv(kEnvironmentVariable);
  *value_out = value ? value : "";
  if (*value_out == "" || *value_out == "auto") return KernelRequest::kAuto;
  if (*value_out == "openssl") return KernelRequest::kOpenSsl;
  return KernelRequest::kNotUnderstood;
}

Status environment_not_understood(const std::string& value) {
  return Status::invalid_argument(std::string(kEnvironmentVariable) + "=\"" + value +
                                  "\": not a SHA-256 kernel choice (expected openssl, auto or empty)");
}

// The first use of a kernel, when no one chose one before: the environment decides.
void choose_at_first_use() {
  KernelChoice& c = kernel_choice();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.chosen.load(std::memory_order_relaxed)) return;  // another thread, or a caller, chose first
  std::string value;
  switch (environment_request(&value)) {
    case KernelRequest::kAuto: return choose_automatically_locked(c);
    case KernelRequest::kOpenSsl:
      return set_choice_locked(c, Sha256Kernel::kOpenSsl, KernelReason::kForcedByEnvironment);
    case KernelRequest::kNotUnderstood:
      // Nobody called configure_sha256_kernel_from_env to refuse it: the reference code is the
      // choice that cannot be wrong, and the user hears that the variable was not understood.
      std::fprintf(stderr, "ckptcheck: error: %s; using OpenSSL\n",
                   environment_not_understood(value).message().c_str());
      return set_choice_locked(c, Sha256Kernel::kOpenSsl, KernelReason::kEnvironmentNotUnderstood);
  }
}

}  // namespace

bool cpu_has_sha_extensions() {
  static const bool has = detect_sha_extensions();
  return has;
}

Sha256Kernel active_sha256_kernel() {
  KernelChoice& c = kernel_choice();
  if (!c.chosen.load(std::memory_order_acquire)) choose_at_first_use();
  return c.kernel.load(std::memory_order_relaxed);
}

const char* sha256_kernel_name(Sha256Kernel kernel) {
  return kernel == Sha256Kernel::kShaExtensions ? "sha-extensions-x2" : "openssl";
}

const char* active_sha256_kernel_description() {
  const Sha256Kernel kernel = active_sha256_kernel();  // chooses first if no one has
  return describe(kernel, kernel_choice().reason.load(std::memory_order_relaxed));
}

Status sha256_kernel_self_test(Sha256Kernel kernel) {
  if (kernel == Sha256Kernel::kShaExtensions && !cpu_has_sha_extensions())
    return Status::not_supported("this CPU has no SHA extensions");
  const bool flip = kernel == Sha256Kernel::kShaExtensions && self_test_fault().load();
  const std::vector<KnownAnswer>& answers = known_answers();
  for (const KnownAnswer& v : answers) {
    uint32_t state[8];
    std::memcpy(state, kSha256InitialState, sizeof(state));
    kernel_blocks(kernel, state, v.padded.data(), v.padded.size() / 64);
    const std::string got = state_hex(state, flip);
    if (got != v.digest_hex) return mismatch(kernel, std::string("one stream, ") + v.name, got, v.digest_hex);
  }
  // Every ordered pair, a vector beside itself included: each lane with each message and each
  // neighbour. The blocks both have are compressed together, the longer one's rest alone, as
  // sha256_update_two does.
  for (const KnownAnswer& a : answers) {
    for (const KnownAnswer& b : answers) {
      uint32_t state_a[8];
      uint32_t state_b[8];
      std::memcpy(state_a, kSha256InitialState, sizeof(state_a));
      std::memcpy(state_b, kSha256InitialState, sizeof(state_b));
      const size_t blocks_a = a.padded.size() / 64;
      const size_t blocks_b = b.padded.size() / 64;
      const size_t both = std::min(blocks_a, blocks_b);
      kernel_blocks_two(kernel, state_a, a.padded.data(), state_b, b.padded.data(), both);
      kernel_blocks(kernel, state_a, a.padded.data() + 64 * both, blocks_a - both);
      kernel_blocks(kernel, state_b, b.padded.data() + 64 * both, blocks_b - both);
      const std::string got_a = state_hex(state_a, flip);
      const std::string got_b = state_hex(state_b, flip);
      const std::string pair = std::string(a.name) + " beside " + b.name;
      if (got_a != a.digest_hex)
        return mismatch(kernel, "two streams, first lane, " + pair, got_a, a.digest_hex);
      if (got_b != b.digest_hex)
        return mismatch(kernel, "two streams, second lane, " + pair, got_b, b.digest_hex);
    }
  }
  return Status::ok();
}

Status configure_sha256_kernel_from_env() {
  KernelChoice& c = kernel_choice();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::string value;
  switch (environment_request(&value)) {
    case KernelRequest::kAuto: choose_automatically_locked(c); return Status::ok();
    case KernelRequest::kOpenSsl:
      set_choice_locked(c, Sha256Kernel::kOpenSsl, KernelReason::kForcedByEnvironment);
      return Status::ok();
    case KernelRequest::kNotUnderstood: return environment_not_understood(value);
  }
  return Status::ok();
}

Status select_sha256_kernel(const std::string& name) {
  KernelChoice& c = kernel_choice();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (name == "auto") {
    choose_automatically_locked(c);
  } else if (name == "openssl") {
    set_choice_locked(c, Sha256Kernel::kOpenSsl, KernelReason::kForcedBySelection);
  } else {
    return Status::invalid_argument("\"" + name +
                                    "\": not a SHA-256 kernel choice (expected openssl or auto)");
  }
  return Status::ok();
}

bool use_sha256_kernel(Sha256Kernel kernel) {
  if (kernel == Sha256Kernel::kShaExtensions && !cpu_has_sha_extensions()) return false;
  KernelChoice& c = kernel_choice();
  std::lock_guard<std::mutex> lock(c.mutex);
  set_choice_locked(c, kernel, KernelReason::kSetForTesting);
  return true;
}

void set_sha256_self_test_fault_for_testing(bool flip_a_bit) {
  KernelChoice& c = kernel_choice();
  std::lock_guard<std::mutex> lock(c.mutex);
  self_test_fault().store(flip_a_bit);
  c.sha_ni_self_test.reset();
}

void sha256_blocks(uint32_t state[8], const uint8_t* data, size_t blocks) {
  kernel_blocks(active_sha256_kernel(), state, data, blocks);
}

void sha256_blocks_two(uint32_t state_a[8], const uint8_t* data_a, uint32_t state_b[8], const uint8_t* data_b,
                       size_t blocks) {
  kernel_blocks_two(active_sha256_kernel(), state_a, data_a, state_b, data_b, blocks);
}

}  // namespace ckpt
