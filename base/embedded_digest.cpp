#include "base/embedded_digest.h"

#include <cstring>
#include <memory>

#include "base/json_fields.h"
#include "base/sha256.h"

namespace ckpt {

namespace {

// nlohmann's compact dump() written straight into SHA-256: the same bytes as sha256_hex(j.dump()),
// without holding the whole canonical text (36 MB for a manifest of 320,000 chunks) in memory.
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
  void flush() {
    hash_.update(buffer_, used_);
    used_ = 0;
  }

 private:
  Sha256& hash_;
  char buffer_[64 * 1024];
  size_t used_ = 0;
};

std::string sha256_of_compact_dump(const nlohmann::json& j) {
  Sha256 hash;
  auto out = std::make_shared<Sha256Output>(hash);
  nlohmann::detail::serializer<nlohmann::json> serializer(out, ' ', nlohmann::json::error_handler_t::strict);
  serializer.dump(j, /*pretty_print=*/false, /*ensure_ascii=*/false, /*indent_step=*/0);
  out->flush();
  return hash.finish_hex();
}

}  // namespace

void embed_digest(nlohmann::json& j, const char* field) {
  j.erase(field);
  const std::string digest = sha256_of_compact_dump(j);
  j[field] = digest;
}

Result<EmbeddedDigest> read_embedded_digest(const std::string& text, const char* field,
                                            const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(text, where));
  if (!j.is_object()) return Status::corruption(where + ": expected a JSON object");
  return take_embedded_digest(j, field);
}

EmbeddedDigest take_embedded_digest(nlohmann::json& j, const char* field) {
  EmbeddedDigest d;
  auto it = j.find(field);
  if (it == j.end()) return d;
  d.present = true;
  d.recorded = it->is_string() ? it->get<std::string>() : it->dump();
  j.erase(it);
  d.computed = sha256_of_compact_dump(j);
  return d;
}

}  // namespace ckpt
