#include "formats/native_header_fast_parse.h"

#include <algorithm>

#include "base/simd_json_fields.h"
#include "formats/native_shard_format.h"

namespace ckpt {

namespace {

using simdjson::ondemand::value;

// One entry's fields where they lie (dims in `storage`), each field exactly once, and every check
// ChunkInfo::from_json makes.
struct EntryStorage {
  Dims global_shape, offsets, shape;
};

bool parse_entry(value e, NativeChunkFields* c, EntryStorage* storage) {
  simdjson::ondemand::object o;
  if (e.get_object().get(o)) return false;
  std::string_view dtype;
  const bool fields = simd_each_field(o, (1u << 9) - 1, [&](std::string_view key, value v) -> int {
    if (key == "name") return simd_string_view(v, &c->name) ? 0 : kFieldRefused;
    if (key == "component") return simd_string_view(v, &c->component) ? 1 : kFieldRefused;
    if (key == "dtype") return simd_string_view(v, &dtype) ? 2 : kFieldRefused;
    if (key == "global_shape") return simd_dims(v, &storage->global_shape) ? 3 : kFieldRefused;
    if (key == "offsets") return simd_dims(v, &storage->offsets) ? 4 : kFieldRefused;
    if (key == "shape") return simd_dims(v, &storage->shape) ? 5 : kFieldRefused;
    if (key == "data_offset") return simd_uint(v, &c->data_offset) ? 6 : kFieldRefused;
    if (key == "data_bytes") return simd_uint(v, &c->data_bytes) ? 7 : kFieldRefused;
    if (key == "sha256") return simd_string_view(v, &c->sha256) ? 8 : kFieldRefused;
    return kFieldRefused;
  });
  if (!fields) return false;
  const auto parsed = dtype_from_name(std::string(dtype));
  if (!parsed) return false;
  c->dtype = *parsed;
  c->global_shape = storage->global_shape;
  c->offsets = storage->offsets;
  c->shape = storage->shape;
  return chunk_entry_is_consistent(c->name, c->dtype, c->global_shape, c->offsets, c->shape, c->data_bytes,
                                   c->sha256);
}

}  // namespace

struct NativeHeaderScratch::Parser {
  simdjson::ondemand::parser parser;
};

NativeHeaderScratch::NativeHeaderScratch() : parser(std::make_unique<Parser>()) {}
NativeHeaderScratch::~NativeHeaderScratch() = default;

bool walk_native_header_fast(const std::string& header, size_t max_chunks, nlohmann::json* metadata,
                             const std::function<bool(const NativeChunkFields&)>& entry,
                             NativeHeaderScratch* scratch) {
  simdjson::padded_string copy;
  std::optional<simdjson::ondemand::parser> own;
  simdjson::ondemand::parser& parser = scratch ? scratch->parser->parser : own.emplace();
  simdjson::ondemand::document doc;
  simdjson::ondemand::object o;
  if (parser.iterate(simd_padded(header, copy)).get(doc) || doc.get_object().get(o)) return false;
  std::string format;
  size_t count = 0;
  EntryStorage storage;
  // Each field the reader uses exactly once (with a repeated one, nlohmann's choice is the
  // reference). Any other field leaves the header to the reference path, which also bounds its
  // depth (skipped here it would not be: 200,000 nested arrays in an unused field).
  const bool fields = simd_each_field(o, 0b111, [&](std::string_view key, value v) -> int {
    if (key == "format") return simd_string(v, &format) ? 0 : kFieldRefused;
    if (key == "metadata") return simd_object_tree(v, metadata) ? 1 : kFieldRefused;
    if (key == "chunks") {
      const bool listed = simd_each_element(v, [&](value c) {
        NativeChunkFields fields;
        return count++ < max_chunks && parse_entry(c, &fields, &storage) && entry(fields);
      });
      return listed ? 2 : kFieldRefused;
    }
    return kFieldRefused;
  });
  const char* after = nullptr;  // the root object fully read: nothing may follow it
  return fields && format == kNativeHeaderFormat && doc.current_location().get(after);
}

std::optional<NativeHeaderFields> parse_native_header_fast(const std::string& header, size_t max_chunks) {
  NativeHeaderFields out;
  // A chunk entry the writer writes is 250-300 bytes: room for every entry of a header it wrote,
  // so the list is not regrown (and its records moved) ~15 times on the way to 20,000 entries.
  out.chunks.reserve(std::min(max_chunks, header.size() / 256 + 1));
  const bool read =
      walk_native_header_fast(header, max_chunks, &out.metadata, [&](const NativeChunkFields& f) {
        ChunkInfo& c = out.chunks.emplace_back();
        c.name.assign(f.name);
        c.component.assign(f.component);
        c.dtype = f.dtype;
        c.global_shape = f.global_shape.to_vector();
        c.offsets = f.offsets.to_vector();
        c.shape = f.shape.to_vector();
        c.data_offset = f.data_offset;
        c.data_bytes = f.data_bytes;
        c.sha256.assign(f.sha256);
        return true;
      });
  if (!read) return std::nullopt;
  return out;
}

}  // namespace ckpt
