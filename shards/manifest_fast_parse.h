// The manifest parsed with simdjson (issue 44: at 320,000 chunks nlohmann's tree was most of the
// time and 12-14x the text in memory). Only a manifest that is exactly what the writer lays out
// takes this path: every object holds exactly its known fields, once each, with the types the
// strict parser requires, and every check of parse_manifest passes. Anything else (an unknown or
// repeated field, a wrong type, a failing check, nesting deeper than 64) returns nullopt, and
// parse_manifest runs the nlohmann path, whose errors and digest are the reference.
#pragma once

#include <optional>
#include <string>

#include "shards/manifest.h"

namespace ckpt {

// With `digest`: the digest of the manifest's content, from its fields (shards/manifest_text.h).
// That equals manifest_digest(text) because the fields are all the text holds; a recorded digest
// that differs returns nullopt too, so a mismatch is always named by the reference path.
std::optional<Manifest> parse_manifest_fast(const std::string& text, ManifestDigest* digest);

}  // namespace ckpt
