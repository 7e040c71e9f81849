#include "base/simd_json_fields.h"

#include <string_view>

#include "base/file_io.h"
#include "base/huge_pages.h"

namespace ckpt {

static_assert(kReadPaddingBytes >= simdjson::SIMDJSON_PADDING, "read_small_file leaves room for simdjson");

bool simd_parse(simdjson::dom::parser& parser, const std::string& text, simdjson::dom::element* root) {
  if (parser.allocate(text.size(), kMaxFastJsonDepth)) return false;
  // The tape is 8 bytes of address space per byte of text and the string buffer 5/3: only what the
  // document fills is touched, in huge pages where the kernel gives them.
  const size_t capacity = parser.capacity();
  advise_huge_pages(parser.doc.tape.get(), SIMDJSON_ROUNDUP_N(capacity + 3, 64) * sizeof(uint64_t));
  advise_huge_pages(parser.doc.string_buf.get(), 5 * capacity / 3);
  const bool padded = text.capacity() - text.size() >= simdjson::SIMDJSON_PADDING;
  return !parser.parse(text.data(), text.size(), /*realloc_if_needed=*/!padded).get(*root);
}

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

bool simd_string(const object& o, const char* key, std::string* out) {
  std::string_view v;
  if (o[key].get_string().get(v)) return false;
  out->assign(v.data(), v.size());
  return true;
}

bool simd_uint(const object& o, const char* key, uint64_t* out) {
  element e;
  if (o[key].get(e)) return false;
  // nlohmann reads an integer literal as an integer and anything with '.' or 'e' as a float,
  // which json_uint refuses; simdjson types numbers the same way.
  if (e.is_int64()) {
    const int64_t v = e.get_int64().value_unsafe();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return !e.get_uint64().get(*out);
}

bool simd_int(const object& o, const char* key, int64_t* out) {
  element e;
  if (o[key].get(e)) return false;
  return e.is_int64() && !e.get_int64().get(*out);
}

bool simd_dims(const object& o, const char* key, std::vector<int64_t>* out, size_t max_len) {
  array a;
  if (o[key].get_array().get(a) || a.size() > max_len) return false;
  out->clear();
  out->reserve(a.size());
  for (element e : a) {
    int64_t v = 0;
    if (!e.is_int64() || e.get_int64().get(v) || v < 0) return false;
    out->push_back(v);
  }
  return true;
}

bool simd_to_nlohmann(const element& e, nlohmann::json* out, size_t depth) {
  if (depth > kMaxFastJsonDepth) return false;
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      *out = nlohmann::json::object();
      for (auto field : object(e)) {
        const std::string key(field.key);
        if (out->contains(key)) return false;
        if (!simd_to_nlohmann(field.value, &(*out)[key], depth + 1)) return false;
      }
      return true;
    }
    case simdjson::dom::element_type::ARRAY: {
      *out = nlohmann::json::array();
      for (element v : array(e)) {
        out->push_back(nullptr);
        if (!simd_to_nlohmann(v, &out->back(), depth + 1)) return false;
      }
      return true;
    }
    case simdjson::dom::element_type::INT64: {
      const int64_t v = e.get_int64().value_unsafe();
      *out = v < 0 ? nlohmann::json(v) : nlohmann::json(static_cast<uint64_t>(v));
      return true;
    }
    case simdjson::dom::element_type::UINT64: *out = e.get_uint64().value_unsafe(); return true;
    case simdjson::dom::element_type::DOUBLE: *out = e.get_double().value_unsafe(); return true;
    case simdjson::dom::element_type::STRING: *out = std::string(e.get_string().value_unsafe()); return true;
    case simdjson::dom::element_type::BOOL: *out = e.get_bool().value_unsafe(); return true;
    case simdjson::dom::element_type::NULL_VALUE: *out = nullptr; return true;
  }
  return false;
}

}  // namespace ckpt
