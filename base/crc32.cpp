#include "base/crc32.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CKPT_CRC32_CLMUL 1
#endif

namespace ckpt {

namespace {

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;
CrcTables make_crc_tables() {
  CrcTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// On the inverted register (no pre/post inversion here).
uint32_t crc32_tables(uint32_t c, const uint8_t* p, size_t n) {
  static const CrcTables t = make_crc_tables();
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t lo = c ^ load_le32(p);
    const uint32_t hi = load_le32(p + 4);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return c;
}

#ifdef CKPT_CRC32_CLMUL
// Carry-less multiplication folding (Intel, "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction", 2009), in the bit-reflected domain of this polynomial, as zlib's and
// Chromium's x86 CRC-32 do: four 128-bit lanes fold 64 bytes per step, then fold to one lane, to
// 64 bits, and Barrett-reduce to 32. On the inverted register; `n` >= 64 and a multiple of 16.
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold_into(__m128i acc, __m128i next, __m128i k) {
  const __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x11), next), lo);
}

__attribute__((target("pclmul,sse4.1"))) uint32_t crc32_clmul(uint32_t c, const uint8_t* p, size_t n) {
  alignas(16) static const uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[] = {0x01db710641, 0x01f7011641};
  auto load = [](const uint8_t* at) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  };  // SSE2

  __m128i x1 = load(p), x2 = load(p + 16), x3 = load(p + 32), x4 = load(p + 48);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(c)));
  __m128i x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    x1 = fold_into(x1, load(p), x0);
    x2 = fold_into(x2, load(p + 16), x0);
    x3 = fold_into(x3, load(p + 32), x0);
    x4 = fold_into(x4, load(p + 48), x0);
  }
  // Four lanes into one.
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold_into(x1, x2, x0);
  x1 = fold_into(x1, x3, x0);
  x1 = fold_into(x1, x4, x0);
  for (; n >= 16; p += 16, n -= 16) x1 = fold_into(x1, load(p), x0);
  // 128 bits to 64.
  const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
  x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
  x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), x0, 0x00), x2);
  // Barrett reduction to 32 bits.
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), x0, 0x10);
  x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, mask32), x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

bool has_clmul() {
  static const bool supported = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return supported;
}
#endif

}  // namespace

uint32_t crc32_update_portable(uint32_t crc, const uint8_t* data, size_t size) {
  return ~crc32_tables(~crc, data, size);
}

uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t size) {
  uint32_t c = ~crc;
#ifdef CKPT_CRC32_CLMUL
  if (size >= 64 && has_clmul()) {
    const size_t folded = size & ~size_t{15};
    c = crc32_clmul(c, data, folded);
    data += folded;
    size -= folded;
  }
#endif
  return ~crc32_tables(c, data, size);
}

}  // namespace ckpt
