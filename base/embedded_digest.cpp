#include "base/embedded_digest.h"

#include "base/json_fields.h"
#include "base/sha256.h"

namespace ckpt {

void embed_digest(nlohmann::json& j, const char* field) {
  j.erase(field);
  const std::string digest = sha256_hex(j.dump());
  j[field] = digest;
}

Result<EmbeddedDigest> read_embedded_digest(const std::string& text, const char* field,
                                            const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(text, where));
  if (!j.is_object()) return Status::corruption(where + ": expected a JSON object");
  EmbeddedDigest d;
  auto it = j.find(field);
  if (it == j.end()) return d;
  d.present = true;
  d.recorded = it->is_string() ? it->get<std::string>() : it->dump();
  j.erase(it);
  d.computed = sha256_hex(j.dump());
  return d;
}

}  // namespace ckpt
