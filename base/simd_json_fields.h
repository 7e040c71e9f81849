// Typed fields of a JSON document read with simdjson's On-Demand API, for the fast paths of the
// large metadata files (manifests, native shard headers; issue 44). The text is read once, front
// to back, and each value taken where it lies: the DOM parser these replaced first built a tape of
// the whole document (8 bytes of address space per byte of text: ~300 MB touched for an 84 MB
// manifest, and on the bench VM a first touch costs ~14 us a 4 KiB page).
//
// Each getter returns false when the value is not exactly what the strict nlohmann accessors of
// base/json_fields.h accept, so the caller can hand the document to the nlohmann path, whose
// error messages are the reference.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/dims.h"
#include "base/sha256.h"

namespace ckpt {

// The text padded for simdjson: in place when its capacity already holds the padding (read_small_file
// leaves that room), else one padded copy kept in `copy`.
simdjson::padded_string_view simd_padded(const std::string& text, simdjson::padded_string& copy);

bool simd_string(simdjson::ondemand::value v, std::string* out);
// The string's text, in place when plain (simd_plain_string), else unescaped into the parser's
// string buffer: valid while the document is, and no copy for the plain strings a writer writes.
bool simd_string_view(simdjson::ondemand::value v, std::string_view* out);
// A string of 64 lowercase hex digits (is_sha256_hex), as the digest it spells.
bool simd_sha256(simdjson::ondemand::value v, Sha256Digest* out);

// The string that starts at `raw` (just past its opening quote), read in place when it holds no
// escape and no control character: it is then exactly what unescaping would give, and simdjson is
// spared copying it into its string buffer. That buffer is written front to back for the whole
// document and never reused: for a 320k-chunk manifest its keys and digests alone touched ~37 MB
// (issue 44). False for any other string (the caller unescapes it); the scan stops at the closing
// quote, which stage 1 found, or at the first control character after it: the zero padding after
// the text, or, for a piece of a larger text read in place (shards/manifest_tensor_pieces.h), the
// next raw newline at the latest.
bool simd_plain_string(const char* raw, std::string_view* out);
// nlohmann reads an integer literal as an integer and anything with '.' or 'e' as a float, which
// json_uint and json_int refuse; simdjson's integer getters refuse those too.
bool simd_uint(simdjson::ondemand::value v, uint64_t* out);
bool simd_int(simdjson::ondemand::value v, int64_t* out);
// json_dims: an array of at most `max_len` non-negative integers.
bool simd_dims(simdjson::ondemand::value v, std::vector<int64_t>* out, size_t max_len = 16);
bool simd_dims(simdjson::ondemand::value v, Dims* out, size_t max_len = 16);
// An object of any JSON (a manifest's config, a header's metadata) as the tree nlohmann builds:
// its text goes through parse_json, the reference parser (its depth limit and its choice among
// repeated keys included).
bool simd_object_tree(simdjson::ondemand::value v, nlohmann::json* out);

// What `take(key, value)` returns for a field: its slot (0-31), each of which may be seen once, or
// this, for a field that is unknown or not what the strict parser accepts: the caller gives up.
constexpr int kFieldRefused = -1;

// Each field of `o`, in document order, to `take`; false on a refused field, a slot seen twice, a
// syntax error, or unless every slot in `required` (a bit mask) was seen; slots outside it are
// optional fields.
template <typename Take>
bool simd_each_field(simdjson::ondemand::object o, uint32_t required, const Take& take) {
  uint32_t seen = 0;
  for (auto result : o) {
    simdjson::ondemand::field field;
    if (std::move(result).get(field)) return false;
    std::string_view key;
    if (!simd_plain_string(field.key().raw(), &key) && field.unescaped_key().get(key)) return false;
    simdjson::ondemand::value v = field.value();
    const int slot = take(key, v);
    if (slot < 0 || (seen & (1u << slot))) return false;
    seen |= 1u << slot;
  }
  return (seen & required) == required;
}

// Each element of the array `v` to `take(value)`; false on a syntax error or when take does.
// `reserve(n)` is told the number of elements first, counted by a walk over the array: worth it for
// a tensor's few chunks, a loss for a list of 20,000 (measured: the walk costs more than growing).
template <typename Take, typename Reserve>
bool simd_each_element(simdjson::ondemand::value v, const Take& take, const Reserve& reserve) {
  simdjson::ondemand::array a;
  size_t count = 0;
  if (v.get_array().get(a) || a.count_elements().get(count)) return false;
  reserve(count);
  for (auto element : a) {
    simdjson::ondemand::value e;
    if (element.get(e) || !take(e)) return false;
  }
  return true;
}

template <typename Take>
bool simd_each_element(simdjson::ondemand::value v, const Take& take) {
  return simd_each_element(v, take, [](size_t) {});
}

}  // namespace ckpt
