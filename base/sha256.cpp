#include "base/sha256.h"

#include <openssl/evp.h>

#include <algorithm>

#include "base/byte_source.h"

namespace ckpt {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void Sha256::update(const void* data, size_t size) {
  if (size) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}

Sha256Digest Sha256::finish() {
  Sha256Digest digest{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest.data(), &len);
  return digest;
}

std::string Sha256::finish_hex() {
  return digest_hex(finish());
}

std::string to_hex(const uint8_t* data, size_t size) {
  static const char* kHex = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 0xf];
  }
  return out;
}

std::string digest_hex(const Sha256Digest& digest) {
  return to_hex(digest.data(), digest.size());
}

std::string sha256_hex(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish_hex();
}

std::string sha256_hex(const std::string& text) {
  return sha256_hex(text.data(), text.size());
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
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

Result<PiecewiseSha256> sha256_hex_of_pieces(const ByteSource& source, uint64_t length, uint64_t piece_bytes,
                                             std::atomic<uint64_t>* hashed) {
  if (piece_bytes == 0) return Status::invalid_argument("sha256_hex_of_pieces: piece size 0");
  Sha256 whole;
  PiecewiseSha256 out;
  for (uint64_t start = 0; start < length; start += piece_bytes) {
    Sha256 piece;
    CKPT_RETURN_IF_ERROR(source.scan(start, std::min(piece_bytes, length - start), kStreamBlockBytes,
                                     [&](uint64_t, const uint8_t* data, size_t n) {
                                       whole.update(data, n);
                                       piece.update(data, n);
                                       if (hashed) hashed->fetch_add(n, std::memory_order_relaxed);
                                     }));
    out.pieces.push_back(piece.finish_hex());
  }
  out.whole = whole.finish_hex();
  return out;
}

Result<std::string> sha256_hex_of_file(const std::string& path, uint64_t* size_out) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  if (size_out) *size_out = source->size();
  return sha256_hex_of_range(*source, 0, source->size());
}

}  // namespace ckpt
