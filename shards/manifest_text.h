// The text of a manifest written straight from its fields: the same bytes nlohmann::json's dump()
// gives for the manifest's JSON object (keys sorted), without building that object. A manifest of
// 320,000 chunks is 36 MB; its object was 12-14x that in memory and most of the time of writing it
// or of naming its digest (issue 44).
#pragma once

#include <string>

#include "shards/manifest.h"

namespace ckpt {

// SHA-256 of the canonical text (compact, keys sorted) of everything but the digest field: what
// manifest_to_json_text records as "manifest_sha256" and what manifest_digest recomputes.
std::string manifest_content_sha256(const Manifest& manifest);

// The committed text: pretty (indent 1), keys sorted, with "manifest_sha256" = `digest`.
std::string manifest_pretty_text(const Manifest& manifest, const std::string& digest);

}  // namespace ckpt
