#include "formats/native_header_fast_parse.h"

#include <algorithm>

#include "base/simd_json_fields.h"
#include "formats/native_shard_format.h"

namespace ckpt {

namespace {

using simdjson::ondemand::value;

bool parse_chunk(value e, ChunkInfo* c) {
  simdjson::ondemand::object o;
  if (e.get_object().get(o)) return false;
  std::string dtype;
  const bool fields = simd_each_field(o, (1u << 9) - 1, [&](std::string_view key, value v) -> int {
    if (key == "name") return simd_string(v, &c->name) ? 0 : kFieldRefused;
    if (key == "component") return simd_string(v, &c->component) ? 1 : kFieldRefused;
    if (key == "dtype") return simd_string(v, &dtype) ? 2 : kFieldRefused;
    if (key == "global_shape") return simd_dims(v, &c->global_shape) ? 3 : kFieldRefused;
    if (key == "offsets") return simd_dims(v, &c->offsets) ? 4 : kFieldRefused;
    if (key == "shape") return simd_dims(v, &c->shape) ? 5 : kFieldRefused;
    if (key == "data_offset") return simd_uint(v, &c->data_offset) ? 6 : kFieldRefused;
    if (key == "data_bytes") return simd_uint(v, &c->data_bytes) ? 7 : kFieldRefused;
    if (key == "sha256") return simd_string(v, &c->sha256) ? 8 : kFieldRefused;
    return kFieldRefused;
  });
  if (!fields) return false;
  const auto parsed = dtype_from_name(dtype);
  if (!parsed) return false;
  c->dtype = *parsed;
  return chunk_entry_is_consistent(c->name, c->dtype, c->global_shape, c->offsets, c->shape, c->data_bytes,
                                   c->sha256);
}

}  // namespace

std::optional<NativeHeaderFields> parse_native_header_fast(const std::string& header, size_t max_chunks) {
  simdjson::padded_string copy;
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object o;
  if (parser.iterate(simd_padded(header, copy)).get(doc) || doc.get_object().get(o)) return std::nullopt;
  NativeHeaderFields out;
  std::string format;
  // Each field the reader uses exactly once (with a repeated one, nlohmann's choice is the
  // reference). Any other field leaves the header to the reference path, which also bounds its
  // depth (skipped here it would not be: 200,000 nested arrays in an unused field).
  // A chunk entry the writer writes is 250-300 bytes: room for every entry of a header it wrote,
  // so the list is not regrown (and its records moved) ~15 times on the way to 20,000 entries.
  out.chunks.reserve(std::min(max_chunks, header.size() / 256 + 1));
  const bool fields = simd_each_field(o, 0b111, [&](std::string_view key, value v) -> int {
    if (key == "format") return simd_string(v, &format) ? 0 : kFieldRefused;
    if (key == "metadata") return simd_object_tree(v, &out.metadata) ? 1 : kFieldRefused;
    if (key == "chunks") {
      const bool listed = simd_each_element(v, [&](value c) {
        if (out.chunks.size() == max_chunks) return false;
        out.chunks.emplace_back();
        return parse_chunk(c, &out.chunks.back());
      });
      return listed ? 2 : kFieldRefused;
    }
    return kFieldRefused;
  });
  const char* after = nullptr;  // the root object fully read: nothing may follow it
  if (!fields || format != kNativeHeaderFormat || !doc.current_location().get(after)) return std::nullopt;
  return out;
}

}  // namespace ckpt
