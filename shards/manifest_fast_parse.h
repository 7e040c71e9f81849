// The manifest read with simdjson's On-Demand API (issue 44: at 320,000 chunks nlohmann's tree was
// most of the time and 12-14x the text in memory). Only a manifest that holds what the writer
// writes takes this path: every object holds exactly its known fields, once each, with the types
// the strict parser requires, nothing follows the root, and every check of parse_manifest passes.
// Anything else (an unknown or repeated field, a wrong type, a failing check, trailing text)
// returns nullopt, and parse_manifest runs the nlohmann path, whose errors and digest are the
// reference. config, pins and extra go through parse_json, the reference parser, depth bound and
// all.
#pragma once

#include <optional>
#include <string>

#include "shards/manifest.h"

namespace ckpt {

// With `digest`: the digest of the manifest's content, from its fields (shards/manifest_text.h).
// That equals manifest_digest(text) because the fields are all the text holds; a recorded digest
// that differs returns nullopt too, so a mismatch is always named by the reference path.
// The writer's text is read a tensor at a time (shards/manifest_tensor_pieces.h), any other
// whole; `read_by_tensor`, where given, says which (the tests hold the writer's layout to it).
std::optional<Manifest> parse_manifest_fast(const std::string& text, ManifestDigest* digest,
                                            bool* read_by_tensor = nullptr);

}  // namespace ckpt
