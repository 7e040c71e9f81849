#include "shards/manifest_fast_parse.h"

#include <algorithm>
#include <future>
#include <set>
#include <string_view>
#include <system_error>

#include "base/embedded_digest.h"
#include "base/simd_json_fields.h"
#include "shards/manifest_tensor_pieces.h"
#include "shards/manifest_text.h"

namespace ckpt {

namespace {

using simdjson::ondemand::object;
using simdjson::ondemand::value;

bool parse_shard(value e, ManifestShard* s) {
  object o;
  if (e.get_object().get(o)) return false;
  const bool fields = simd_each_field(o, 0b111111, [&](std::string_view key, value v) -> int {
    if (key == "path") return simd_string(v, &s->path) && is_safe_relative_path(s->path) ? 0 : kFieldRefused;
    if (key == "format") return simd_string(v, &s->format) ? 1 : kFieldRefused;
    if (key == "bytes") return simd_uint(v, &s->bytes) ? 2 : kFieldRefused;
    if (key == "sha256") return simd_string(v, &s->sha256) ? 3 : kFieldRefused;
    if (key == "rank") return simd_int(v, &s->rank) ? 4 : kFieldRefused;
    if (key == "sha256_of") return simd_string(v, &s->sha256_of) ? 5 : kFieldRefused;
    return kFieldRefused;
  });
  if (!fields) return false;
  if (s->sha256_of != "file" && s->sha256_of != "header") return false;
  if (s->sha256_of == "header" && s->format != "native" && s->format != "safetensors" && s->format != "hdf5")
    return false;
  return s->sha256.size() == 64;
}

bool parse_chunk(value e, size_t num_shards, ManifestChunk* c) {
  object o;
  if (e.get_object().get(o)) return false;
  uint64_t shard = num_shards;
  const bool fields = simd_each_field(o, 0b111111, [&](std::string_view key, value v) -> int {
    if (key == "data_bytes") return simd_uint(v, &c->data_bytes) ? 0 : kFieldRefused;
    if (key == "data_offset") return simd_uint(v, &c->data_offset) ? 1 : kFieldRefused;
    if (key == "offsets") return simd_dims(v, &c->offsets) ? 2 : kFieldRefused;
    if (key == "sha256") return simd_sha256(v, &c->sha256) ? 3 : kFieldRefused;
    if (key == "shape") return simd_dims(v, &c->shape) ? 4 : kFieldRefused;
    if (key == "shard") return simd_uint(v, &shard) ? 5 : kFieldRefused;
    return kFieldRefused;
  });
  if (!fields || shard >= num_shards) return false;
  c->shard = static_cast<size_t>(shard);
  return true;
}

// `listed`: whether the tensor lists its chunks, which its manifest's version (read after the
// tensors: keys are sorted) then requires or forbids.
bool parse_tensor(value e, size_t num_shards, ManifestTensor* t, bool* listed) {
  object o;
  if (e.get_object().get(o)) return false;
  std::string dtype;
  *listed = false;
  const bool fields = simd_each_field(o, 0b1111, [&](std::string_view key, value v) -> int {
    if (key == "name") return simd_string(v, &t->name) ? 0 : kFieldRefused;
    if (key == "component") return simd_string(v, &t->component) ? 1 : kFieldRefused;
    if (key == "dtype") return simd_string(v, &dtype) ? 2 : kFieldRefused;
    if (key == "shape") return simd_dims(v, &t->shape) ? 3 : kFieldRefused;
    if (key == "chunks") {
      const bool chunks_read = simd_each_element(
          v,
          [&](value c) {
            t->chunks.emplace_back();
            return parse_chunk(c, num_shards, &t->chunks.back());
          },
          [&](size_t n) { t->chunks.reserve(n); });
      *listed = true;
      return chunks_read ? 4 : kFieldRefused;
    }
    return kFieldRefused;
  });
  if (!fields) return false;
  const auto parsed = dtype_from_name(dtype);
  // Only the spelling the writer uses: the digest is recomputed from the fields.
  if (!parsed || dtype_name(*parsed) != dtype) return false;
  t->dtype = *parsed;
  return checked_nbytes(t->shape, t->dtype).has_value();
}

// The root's fields, each to `m`; the "tensors" array to `read_tensors(value)`.
// The tensors' chunk lists as its version wants them: in every tensor (version 1), or in none and
// every shard a native one with its header hashed (version 2). `listing`: how many tensors list
// their chunks.
bool chunk_records_as_versioned(Manifest& m, int64_t version, size_t listing) {
  if (version == kManifestVersionChunksListed) return listing == m.tensors.size();
  m.chunk_records = ChunkRecords::kInShardHeaders;
  return listing == 0 && std::all_of(m.shards.begin(), m.shards.end(), holds_chunks_in_header);
}

template <typename ReadTensors>
bool parse_root(object o, Manifest& m, std::string& recorded, bool& has_digest, const size_t& listing,
                const ReadTensors& read_tensors) {
  std::string format;
  int64_t version = 0;
  // Every field but the digest (slot 9), which manifests written before digests lack.
  const uint32_t required = ((1u << 12) - 1) & ~(1u << 9);
  const bool fields = simd_each_field(o, required, [&](std::string_view key, value v) -> int {
    if (key == "format") return simd_string(v, &format) && format == kManifestFormat ? 0 : kFieldRefused;
    if (key == "version") {
      const bool known = simd_int(v, &version) && (version == kManifestVersionChunksListed ||
                                                   version == kManifestVersionChunksInHeaders);
      return known ? 1 : kFieldRefused;
    }
    if (key == "step") return simd_int(v, &m.step) && m.step >= 0 ? 2 : kFieldRefused;
    if (key == "created_utc") return simd_string(v, &m.created_utc) ? 3 : kFieldRefused;
    if (key == "world_size") return simd_int(v, &m.world_size) ? 4 : kFieldRefused;
    if (key == "strategy") return simd_string(v, &m.strategy) ? 5 : kFieldRefused;
    if (key == "config") return simd_object_tree(v, &m.config) ? 6 : kFieldRefused;
    if (key == "pins") return simd_object_tree(v, &m.pins) ? 7 : kFieldRefused;
    if (key == "extra") return simd_object_tree(v, &m.extra) ? 8 : kFieldRefused;
    if (key == kManifestDigestField) {
      has_digest = true;
      return simd_string(v, &recorded) ? 9 : kFieldRefused;
    }
    if (key == "shards") {
      const bool listed = simd_each_element(v, [&](value s) {
        m.shards.emplace_back();
        return parse_shard(s, &m.shards.back());
      });
      return listed ? 10 : kFieldRefused;
    }
    // A tensor's chunks name shards by index: the writer puts the shards first (sorted keys).
    if (key == "tensors" && !m.shards.empty()) return read_tensors(v) ? 11 : kFieldRefused;
    return kFieldRefused;
  });
  return fields && chunk_records_as_versioned(m, version, listing);
}

// Whether the document was read to its end: nothing may follow its root value.
bool read_to_the_end(simdjson::ondemand::document& doc) {
  const char* after = nullptr;
  return doc.current_location().get(after) != simdjson::SUCCESS;
}

// The whole text in one simdjson document.
bool parse_whole(simdjson::padded_string_view text, Manifest& m, std::string& recorded, bool& has_digest) {
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  object o;
  if (parser.iterate(text).get(doc) || doc.get_object().get(o)) return false;
  size_t listing = 0;
  const bool fields = parse_root(o, m, recorded, has_digest, listing, [&](value v) {
    return simd_each_element(v, [&](value t) {
      m.tensors.emplace_back();
      bool listed = false;
      const bool read = parse_tensor(t, m.shards.size(), &m.tensors.back(), &listed);
      listing += listed;
      return read;
    });
  });
  return fields && read_to_the_end(doc);
}

// The writer's layout (shards/manifest_tensor_pieces.h), one tensor at a time: the root without
// the tensors (a copy of the text around the array, which is then "[]"), then each tensor as a
// document of its own, read in place. The same fields are read and the same checks made as by
// parse_whole, and only when the pieces are exactly the root's "tensors" array: its '[' is where the
// root's copy has it, every piece is one whole object read to its end, and between them lie only
// whitespace and one comma each. A JSON array splits into its elements one way only, so the
// tensors are the ones parse_whole reads. false where anything differs (the caller then parses the
// whole text).
bool parse_by_tensor(simdjson::padded_string_view text, const TensorsArraySpan& span, Manifest& m,
                     std::string& recorded, bool& has_digest) {
  const std::string_view all(text.data(), text.size());
  std::string root_text;
  root_text.reserve(span.open + 1 + (all.size() - span.close) + simdjson::SIMDJSON_PADDING);
  root_text.append(all.substr(0, span.open + 1));
  root_text.append(all.substr(span.close));
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  object o;
  const simdjson::padded_string_view root(root_text.data(), root_text.size(), root_text.capacity());
  if (parser.iterate(root).get(doc) || doc.get_object().get(o)) return false;
  simdjson::ondemand::parser tensor_parser;  // grows to the largest tensor's text, then reused
  size_t listing = 0;
  auto read_tensors = [&](value v) {
    if (v.raw_json_token().data() != root_text.data() + span.open) return false;
    size_t at = span.open + 1;
    for (;;) {
      const size_t next = skip_json_space(all, at, span.close);
      if (next == span.close) return true;  // after a tensor (a comma is followed by one), or "[ ]"
      if (!m.tensors.empty()) {
        if (all[next] != ',') return false;
        at = next + 1;
      }
      const std::optional<TextPiece> piece = next_writer_tensor(all, at, span.close);
      if (!piece) return false;
      const simdjson::padded_string_view piece_text(text.data() + piece->begin, piece->end - piece->begin,
                                                    text.capacity() - piece->begin);
      simdjson::ondemand::document tensor_doc;
      value t;
      if (tensor_parser.iterate(piece_text).get(tensor_doc) || tensor_doc.get_value().get(t)) return false;
      m.tensors.emplace_back();
      bool listed = false;
      if (!parse_tensor(t, m.shards.size(), &m.tensors.back(), &listed) || !read_to_the_end(tensor_doc))
        return false;
      listing += listed;
      at = piece->end;
    }
  };
  const bool fields = parse_root(o, m, recorded, has_digest, listing, read_tensors);
  return fields && read_to_the_end(doc);
}

}  // namespace

std::optional<Manifest> parse_manifest_fast(const std::string& text, ManifestDigest* digest,
                                            bool* read_by_tensor) {
  // The digest read off the text needs no parsed field, so a large manifest's runs on a second
  // core while this one parses: the text of 320,000 chunks is 87 MB, and re-serializing the
  // records to hash them was a sixth of opening the checkpoint (issue 44).
  constexpr size_t kConcurrentDigestBytes = size_t{1} << 20;
  std::future<std::optional<std::string>> text_digest;
  if (digest) {
    auto read_off = [&text] { return sha256_without_whitespace(text, kManifestDigestField); };
    try {
      text_digest = std::async(
          text.size() >= kConcurrentDigestBytes ? std::launch::async : std::launch::deferred, read_off);
    } catch (const std::system_error&) {  // no thread to be had: on this one, after the parse
      text_digest = std::async(std::launch::deferred, read_off);
    }
  }
  simdjson::padded_string copy;
  const simdjson::padded_string_view padded = simd_padded(text, copy);

  Manifest m;
  std::string recorded;
  bool has_digest = false;
  bool parsed = false;
  if (const std::optional<TensorsArraySpan> span = find_writer_tensors_array(text)) {
    parsed = parse_by_tensor(padded, *span, m, recorded, has_digest);
    if (!parsed) {
      m = Manifest();
      recorded.clear();
      has_digest = false;
    }
  }
  if (read_by_tensor) *read_by_tensor = parsed;
  if (!parsed && !parse_whole(padded, m, recorded, has_digest)) return std::nullopt;
  // A version-2 manifest without its digest is refused by the reference path, which says why.
  if (m.chunk_records == ChunkRecords::kInShardHeaders && !has_digest) return std::nullopt;
  std::set<std::string_view> paths;
  for (const auto& s : m.shards) {
    if (!paths.insert(s.path).second) return std::nullopt;
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
    // The text hashes as recorded: it is the digested canonical text, give or take whitespace
    // and the digest member, so its fields are the ones digested. Otherwise (an edit, a manifest
    // spelled by another writer, none recorded) the digest is recomputed from the fields.
    const std::optional<std::string> read_off_text = text_digest.get();
    if (d.present && read_off_text == recorded) {
      d.computed = recorded;
    } else {
      try {
        d.computed = manifest_content_sha256(m);
      } catch (const nlohmann::json::exception&) {
        return std::nullopt;  // text nlohmann would not write (invalid UTF-8): the reference path decides
      }
    }
    if (d.present && !d.matches()) return std::nullopt;
    *digest = std::move(d);
  }
  return m;
}

}  // namespace ckpt
