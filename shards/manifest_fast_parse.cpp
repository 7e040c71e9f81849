#include "shards/manifest_fast_parse.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "base/simd_json_fields.h"
#include "shards/manifest_text.h"

namespace ckpt {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

bool get_object(const object& o, const char* key, nlohmann::json* out) {
  element e;
  if (o[key].get(e) || !e.is_object()) return false;
  return simd_to_nlohmann(e, out, 1);
}

bool parse_shard(const element& e, ManifestShard* s) {
  object o;
  if (e.get_object().get(o) || o.size() != 6) return false;
  if (!simd_string(o, "path", &s->path) || !is_safe_relative_path(s->path)) return false;
  if (!simd_string(o, "format", &s->format) || !simd_uint(o, "bytes", &s->bytes)) return false;
  if (!simd_string(o, "sha256", &s->sha256) || !simd_int(o, "rank", &s->rank)) return false;
  if (!simd_string(o, "sha256_of", &s->sha256_of)) return false;
  if (s->sha256_of != "file" && s->sha256_of != "header") return false;
  if (s->sha256_of == "header" && s->format != "native" && s->format != "safetensors" && s->format != "hdf5")
    return false;
  return s->sha256.size() == 64;
}

bool parse_chunk(const element& e, size_t num_shards, ManifestChunk* c) {
  object o;
  if (e.get_object().get(o) || o.size() != 6) return false;
  uint64_t shard = 0;
  if (!simd_uint(o, "shard", &shard) || shard >= num_shards) return false;
  c->shard = static_cast<size_t>(shard);
  return simd_dims(o, "offsets", &c->offsets) && simd_dims(o, "shape", &c->shape) &&
         simd_uint(o, "data_offset", &c->data_offset) && simd_uint(o, "data_bytes", &c->data_bytes) &&
         simd_string(o, "sha256", &c->sha256);
}

bool parse_tensor(const element& e, size_t num_shards, ManifestTensor* t) {
  object o;
  if (e.get_object().get(o) || o.size() != 5) return false;
  std::string dtype;
  if (!simd_string(o, "name", &t->name) || !simd_string(o, "component", &t->component)) return false;
  if (!simd_string(o, "dtype", &dtype)) return false;
  const auto parsed = dtype_from_name(dtype);
  // Only the spelling the writer uses: the digest is recomputed from the fields.
  if (!parsed || dtype_name(*parsed) != dtype) return false;
  t->dtype = *parsed;
  if (!simd_dims(o, "shape", &t->shape) || !checked_nbytes(t->shape, t->dtype)) return false;
  array chunks;
  if (o["chunks"].get_array().get(chunks)) return false;
  t->chunks.resize(chunks.size());
  size_t i = 0;
  for (element c : chunks) {
    if (!parse_chunk(c, num_shards, &t->chunks[i++])) return false;
  }
  return true;
}

}  // namespace

std::optional<Manifest> parse_manifest_fast(const std::string& text, ManifestDigest* digest) {
  simdjson::dom::parser parser;
  element root;
  if (!simd_parse(parser, text, &root)) return std::nullopt;
  object o;
  if (root.get_object().get(o)) return std::nullopt;
  std::string recorded;
  const bool has_digest = o[kManifestDigestField].error() != simdjson::NO_SUCH_FIELD;
  if (has_digest && !simd_string(o, kManifestDigestField, &recorded)) return std::nullopt;
  if (o.size() != (has_digest ? 12u : 11u)) return std::nullopt;

  std::string format;
  int64_t version = 0;
  if (!simd_string(o, "format", &format) || format != kManifestFormat) return std::nullopt;
  if (!simd_int(o, "version", &version) || version != kManifestVersion) return std::nullopt;
  Manifest m;
  if (!simd_int(o, "step", &m.step) || m.step < 0) return std::nullopt;
  if (!simd_string(o, "created_utc", &m.created_utc) || !simd_int(o, "world_size", &m.world_size) ||
      !simd_string(o, "strategy", &m.strategy))
    return std::nullopt;
  if (!get_object(o, "config", &m.config) || !get_object(o, "pins", &m.pins) ||
      !get_object(o, "extra", &m.extra))
    return std::nullopt;
  array shards, tensors;
  if (o["shards"].get_array().get(shards) || o["tensors"].get_array().get(tensors)) return std::nullopt;
  std::set<std::string_view> paths;
  m.shards.resize(shards.size());
  size_t i = 0;
  for (element s : shards) {
    if (!parse_shard(s, &m.shards[i])) return std::nullopt;
    if (!paths.insert(m.shards[i].path).second) return std::nullopt;
    ++i;
  }
  m.tensors.resize(tensors.size());
  i = 0;
  for (element t : tensors) {
    if (!parse_tensor(t, m.shards.size(), &m.tensors[i++])) return std::nullopt;
  }
  std::vector<std::string_view> names;
  names.reserve(m.tensors.size());
  for (const auto& t : m.tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) return std::nullopt;

  if (digest) {
    ManifestDigest d;
    d.present = has_digest;
    d.recorded = recorded;
    try {
      d.computed = manifest_content_sha256(m);
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;  // text nlohmann would not write (invalid UTF-8): the reference path decides
    }
    if (d.present && !d.matches()) return std::nullopt;
    *digest = std::move(d);
  }
  return m;
}

}  // namespace ckpt
