// nlohmann's serializer writing straight into SHA-256 through a 64 KiB buffer: the digest of a
// document's text without holding the text (84 MB for a manifest of 320,000 chunks) in memory.
// Used for a JSON document's own digest (embedded_digest.cpp) and the manifest's (manifest_text.cpp).
#pragma once

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/sha256.h"

namespace ckpt {

class Sha256Output : public nlohmann::detail::output_adapter_protocol<char> {
 public:
  explicit Sha256Output(Sha256& hash) : hash_(hash) {}
  void write_character(char c) override {
    if (used_ == sizeof(buffer_)) flush();
    buffer_[used_++] = c;
  }
  void write_characters(const char* s, std::size_t length) override {
    if (used_ + length > sizeof(buffer_)) flush();
    if (length >= sizeof(buffer_)) {
      hash_.update(s, length);
      return;
    }
    std::memcpy(buffer_ + used_, s, length);
    used_ += length;
  }
  // Hands the buffered bytes to the hash; call before reading the digest.
  void flush() {
    if (used_) hash_.update(buffer_, used_);
    used_ = 0;
  }

 private:
  Sha256& hash_;
  char buffer_[64 * 1024];
  size_t used_ = 0;
};

}  // namespace ckpt
