// Fixed-width integers in file formats: the one place bytes become numbers and back (in the manner
// of leveldb's util/coding.h). Every on-disk format here is little-endian except pickle's BINFLOAT,
// which is big-endian. Callers bound the span first: these never check lengths.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt {

// The `n` (1..8) bytes at p, least significant first.
inline uint64_t decode_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}
inline uint16_t decode_le16(const uint8_t* p) {
  return static_cast<uint16_t>(decode_le(p, 2));
}
inline uint32_t decode_le32(const uint8_t* p) {
  return static_cast<uint32_t>(decode_le(p, 4));
}
inline uint64_t decode_le64(const uint8_t* p) {
  return decode_le(p, 8);
}

// The `n` (1..8) bytes at p, most significant first.
inline uint64_t decode_be(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

inline void encode_le(uint8_t* p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void encode_le32(uint8_t* p, uint32_t v) {
  encode_le(p, v, 4);
}
inline void encode_le64(uint8_t* p, uint64_t v) {
  encode_le(p, v, 8);
}

}  // namespace ckpt
