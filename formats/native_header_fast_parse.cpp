#include "formats/native_header_fast_parse.h"

#include "base/simd_json_fields.h"

namespace ckpt {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

bool parse_chunk(const element& e, ChunkInfo* c) {
  object o;
  if (e.get_object().get(o) || o.size() != 9) return false;
  if (!simd_string(o, "name", &c->name) || c->name.empty() || c->name.size() > kMaxChunkNameBytes)
    return false;
  std::string dtype;
  if (!simd_string(o, "component", &c->component) || !simd_string(o, "dtype", &dtype)) return false;
  const auto parsed = dtype_from_name(dtype);
  if (!parsed) return false;
  c->dtype = *parsed;
  if (!simd_dims(o, "global_shape", &c->global_shape) || !simd_dims(o, "offsets", &c->offsets) ||
      !simd_dims(o, "shape", &c->shape))
    return false;
  if (!simd_uint(o, "data_offset", &c->data_offset) || !simd_uint(o, "data_bytes", &c->data_bytes))
    return false;
  if (!simd_string(o, "sha256", &c->sha256) || c->sha256.size() != 64) return false;
  if (c->offsets.size() != c->global_shape.size() || c->shape.size() != c->global_shape.size()) return false;
  for (size_t d = 0; d < c->shape.size(); ++d) {
    if (c->offsets[d] > c->global_shape[d] || c->shape[d] > c->global_shape[d] - c->offsets[d]) return false;
  }
  if (!checked_numel(c->global_shape)) return false;
  const auto nbytes = checked_nbytes(c->shape, c->dtype);
  return nbytes && *nbytes == c->data_bytes;
}

}  // namespace

std::optional<NativeHeaderFields> parse_native_header_fast(const std::string& header, size_t max_chunks) {
  simdjson::dom::parser parser;
  element root;
  object o;
  if (!simd_parse(parser, header, &root) || root.get_object().get(o)) return std::nullopt;
  // Each field the reader uses exactly once: with a repeated one, nlohmann's choice is the reference.
  int format_seen = 0, chunks_seen = 0, metadata_seen = 0;
  for (auto field : o) {
    format_seen += field.key == "format";
    chunks_seen += field.key == "chunks";
    metadata_seen += field.key == "metadata";
  }
  if (format_seen != 1 || chunks_seen != 1 || metadata_seen != 1) return std::nullopt;
  std::string format;
  if (!simd_string(o, "format", &format) || format != "ckptcheck.native-shard") return std::nullopt;
  array list;
  element metadata;
  if (o["chunks"].get_array().get(list) || o["metadata"].get(metadata) || !metadata.is_object())
    return std::nullopt;
  if (list.size() > max_chunks) return std::nullopt;
  NativeHeaderFields out;
  if (!simd_to_nlohmann(metadata, &out.metadata, 1)) return std::nullopt;
  out.chunks.resize(list.size());
  size_t i = 0;
  for (element c : list) {
    if (!parse_chunk(c, &out.chunks[i++])) return std::nullopt;
  }
  return out;
}

}  // namespace ckpt
