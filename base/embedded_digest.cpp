#include "base/embedded_digest.h"

#include <memory>

#include "base/json_fields.h"
#include "base/sha256.h"
#include "base/sha256_output.h"

namespace ckpt {

namespace {

// nlohmann's compact dump() written straight into SHA-256: the same bytes as sha256_hex(j.dump()),
// without holding the whole canonical text in memory.
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
