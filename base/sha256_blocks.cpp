#include "base/sha256_blocks.h"

// OpenSSL's low-level SHA256_* calls, which work on a caller-held state, are deprecated in 3.0 in
// favour of EVP, which hides the state we need to interleave two streams.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <atomic>
#include <cstring>

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

std::atomic<Sha256Kernel>& kernel_in_use() {
  static std::atomic<Sha256Kernel> kernel{cpu_has_sha_extensions() ? Sha256Kernel::kShaExtensions
                                                                   : Sha256Kernel::kOpenSsl};
  return kernel;
}

}  // namespace

bool cpu_has_sha_extensions() {
  static const bool has = detect_sha_extensions();
  return has;
}

Sha256Kernel active_sha256_kernel() {
  return kernel_in_use().load(std::memory_order_relaxed);
}

const char* sha256_kernel_name(Sha256Kernel kernel) {
  return kernel == Sha256Kernel::kShaExtensions ? "sha-extensions-x2" : "openssl";
}

bool use_sha256_kernel(Sha256Kernel kernel) {
  if (kernel == Sha256Kernel::kShaExtensions && !cpu_has_sha_extensions()) return false;
  kernel_in_use().store(kernel, std::memory_order_relaxed);
  return true;
}

void sha256_blocks(uint32_t state[8], const uint8_t* data, size_t blocks) {
#ifdef CKPT_SHA_X86
  if (active_sha256_kernel() == Sha256Kernel::kShaExtensions) return sha_ni_blocks(state, data, blocks);
#endif
  openssl_blocks(state, data, blocks);
}

void sha256_blocks_two(uint32_t state_a[8], const uint8_t* data_a, uint32_t state_b[8], const uint8_t* data_b,
                       size_t blocks) {
#ifdef CKPT_SHA_X86
  if (active_sha256_kernel() == Sha256Kernel::kShaExtensions)
    return sha_ni_blocks_two(state_a, data_a, state_b, data_b, blocks);
#endif
  openssl_blocks(state_a, data_a, blocks);
  openssl_blocks(state_b, data_b, blocks);
}

}  // namespace ckpt
