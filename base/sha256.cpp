#include "base/sha256.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "base/byte_source.h"
#include "base/sha256_blocks.h"

namespace ckpt {

Sha256::Sha256() {
  std::memcpy(state_, kSha256InitialState, sizeof(state_));
}

void Sha256::check_not_queued(const char* operation) const {
  if (queued_in_) {
    throw std::logic_error(
        std::string("Sha256::") + operation +
        " on a hasher with pieces queued in a Sha256Batch that has not run: its bytes would be "
        "hashed out of order");
  }
  if (lost_queued_bytes_) {
    throw std::logic_error(
        std::string("Sha256::") + operation +
        " on a hasher whose queued pieces were dropped unhashed (its Sha256Batch was destroyed "
        "before running)");
  }
}

Sha256::Split Sha256::begin_update(const uint8_t* data, size_t size) {
  if (size == 0) return {data, 0, data, 0};  // data may be null: nothing to copy
  total_bytes_ += size;
  if (partial_size_) {
    const size_t take = std::min(size, sizeof(partial_) - partial_size_);
    std::memcpy(partial_ + partial_size_, data, take);
    partial_size_ += take;
    data += take;
    size -= take;
    if (partial_size_ < sizeof(partial_)) return {data, 0, data, 0};  // all of it went into the partial block
    sha256_blocks(state_, partial_, 1);
    partial_size_ = 0;
  }
  const size_t blocks = size / 64;
  return {data, blocks, data + 64 * blocks, size - 64 * blocks};
}

void Sha256::end_update(const Split& split) {
  if (split.tail_size) {
    std::memcpy(partial_, split.tail, split.tail_size);
    partial_size_ = split.tail_size;
  }
}

void Sha256::update(const void* data, size_t size) {
  check_not_queued("update");
  const Split split = begin_update(static_cast<const uint8_t*>(data), size);
  if (split.block_count) sha256_blocks(state_, split.blocks, split.block_count);
  end_update(split);
}

void sha256_update_two(Sha256& a, const void* a_data, size_t a_size, Sha256& b, const void* b_data,
                       size_t b_size) {
  a.check_not_queued("update (sha256_update_two)");
  b.check_not_queued("update (sha256_update_two)");
  if (&a == &b) {
    a.update(a_data, a_size);
    a.update(b_data, b_size);
    return;
  }
  const Sha256::Split sa = a.begin_update(static_cast<const uint8_t*>(a_data), a_size);
  const Sha256::Split sb = b.begin_update(static_cast<const uint8_t*>(b_data), b_size);
  const size_t both = std::min(sa.block_count, sb.block_count);
  if (both) sha256_blocks_two(a.state_, sa.blocks, b.state_, sb.blocks, both);
  if (sa.block_count > both) sha256_blocks(a.state_, sa.blocks + 64 * both, sa.block_count - both);
  if (sb.block_count > both) sha256_blocks(b.state_, sb.blocks + 64 * both, sb.block_count - both);
  a.end_update(sa);
  b.end_update(sb);
}

Sha256Digest Sha256::finish() {
  check_not_queued("finish");
  // FIPS 180-4 padding: a 1 bit, zeros up to 56 bytes into a block, the length in bits big-endian.
  const uint64_t bits = total_bytes_ * 8;
  uint8_t pad[128] = {0x80};
  const size_t pad_size = (partial_size_ < 56 ? 56 : 120) - partial_size_;
  for (int i = 0; i < 8; ++i) pad[pad_size + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(pad, pad_size + 8);
  Sha256Digest digest{};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  }
  return digest;
}

std::string Sha256::finish_hex() {
  return digest_hex(finish());
}

namespace {

// Both hex digits of every byte value, one entry a byte: the header comparison, inspect's rows and
// the manifest's text spell a digest per chunk.
constexpr auto kHexPairs = [] {
  constexpr char kDigits[] = "0123456789abcdef";
  std::array<char, 512> t{};
  for (size_t b = 0; b < 256; ++b) {
    t[2 * b] = kDigits[b >> 4];
    t[2 * b + 1] = kDigits[b & 0xf];
  }
  return t;
}();

void hex_into(const uint8_t* data, size_t size, char* out) {
  for (size_t i = 0; i < size; ++i) std::memcpy(out + 2 * i, &kHexPairs[2 * size_t{data[i]}], 2);
}

}  // namespace

std::string to_hex(const uint8_t* data, size_t size) {
  std::string out(size * 2, '0');
  hex_into(data, size, out.data());
  return out;
}

std::string digest_hex(const Sha256Digest& digest) {
  return to_hex(digest.data(), digest.size());
}

void digest_hex_into(const Sha256Digest& digest, char* out) {
  hex_into(digest.data(), digest.size(), out);
}

bool digest_is_hex(const Sha256Digest& digest, std::string_view hex) {
  Sha256HexText spelt;
  digest_hex_into(digest, spelt.data());
  return hex == std::string_view(spelt.data(), spelt.size());
}

std::optional<Sha256Digest> digest_from_hex(std::string_view hex) {
  // One pass through a table (a manifest's parse decodes a digest per chunk): the value of each
  // lowercase hex digit, 16 for every other byte, so one OR of all of them tells a bad digit.
  static constexpr auto kNibble = [] {
    std::array<uint8_t, 256> t{};
    for (auto& v : t) v = 16;
    for (int c = '0'; c <= '9'; ++c) t[static_cast<size_t>(c)] = static_cast<uint8_t>(c - '0');
    for (int c = 'a'; c <= 'f'; ++c) t[static_cast<size_t>(c)] = static_cast<uint8_t>(c - 'a' + 10);
    return t;
  }();
  Sha256Digest out{};
  if (hex.size() != 2 * out.size()) return std::nullopt;
  uint8_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t high = kNibble[static_cast<unsigned char>(hex[2 * i])];
    const uint8_t low = kNibble[static_cast<unsigned char>(hex[2 * i + 1])];
    bad |= high | low;
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  if (bad & 16) return std::nullopt;
  return out;
}

Sha256Digest sha256_digest(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

std::string sha256_hex(const void* data, size_t size) {
  return digest_hex(sha256_digest(data, size));
}

std::string sha256_hex(const std::string& text) {
  return sha256_hex(text.data(), text.size());
}

bool is_sha256_hex(std::string_view s) {
  return digest_from_hex(s).has_value();
}

Result<std::string> sha256_hex_of_range(const ByteSource& source, uint64_t offset, uint64_t length,
                                        std::atomic<uint64_t>* hashed) {
  Sha256 h;
  CKPT_RETURN_IF_ERROR(
      source.scan(offset, length, kStreamBlockBytes, [&](uint64_t, const uint8_t* data, size_t n) {
        h.update(data, n);
        if (hashed) hashed->fetch_add(n, std::memory_order_relaxed);
      }));
  return h.finish_hex();
}

Result<std::string> sha256_hex_of_file(const std::string& path, uint64_t* size_out) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  if (size_out) *size_out = source->size();
  return sha256_hex_of_range(*source, 0, source->size());
}

}  // namespace ckpt
