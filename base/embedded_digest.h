// A JSON document that carries the SHA-256 of its own content: the manifest ("manifest_sha256")
// and the seal ("seal_sha256"). The digest covers the canonical text of everything else (compact,
// keys sorted), so an edit to any field is detectable, including fields no other check reads.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ckpt {

// Sets j[field] to the SHA-256 of j without that field. `j` must be an object.
void embed_digest(nlohmann::json& j, const char* field);

// What a document's own digest says about its content.
struct EmbeddedDigest {
  bool present = false;  // documents written before the digest existed have none
  std::string recorded;
  std::string computed;
  bool matches() const { return present && recorded == computed; }
};

// Fails (kCorruption) only when `text` is not a JSON object.
Result<EmbeddedDigest> read_embedded_digest(const std::string& text, const char* field,
                                            const std::string& where);
// The same for a document already parsed (a JSON object), without a second parse of its text: a
// manifest of 320,000 chunks is 36 MB, and the parse is most of what reading it costs. Erases
// `field` from `j`.
EmbeddedDigest take_embedded_digest(nlohmann::json& j, const char* field);

// The digest of a document's content read off its text: SHA-256 of `text` with the whitespace
// between tokens removed and the root object's `field` member left out. For a document written by
// nlohmann's dump() with sorted keys, compact or pretty, that is byte for byte the canonical text
// the embedded digest covers, so it equals the digest of the parsed content without building or
// re-serializing anything (a 320,000-chunk manifest is 87 MB of text). When it equals the recorded
// digest, the content is what was digested: the text is whitespace and that one member away from
// the hashed bytes. Any other spelling (keys in another order, escapes or numbers written
// differently) hashes to something else, and the caller recomputes from the parsed content.
// nullopt: `text` is not one JSON object whose `field`, if present, is a string.
std::optional<std::string> sha256_without_whitespace(std::string_view text, const char* field);

}  // namespace ckpt
