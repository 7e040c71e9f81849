#include "base/simd_json_fields.h"

#include "base/file_io.h"
#include "base/json_fields.h"

namespace ckpt {

static_assert(kReadPaddingBytes >= simdjson::SIMDJSON_PADDING, "read_small_file leaves room for simdjson");

simdjson::padded_string_view simd_padded(const std::string& text, simdjson::padded_string& copy) {
  if (text.capacity() - text.size() >= simdjson::SIMDJSON_PADDING)
    return simdjson::padded_string_view(text.data(), text.size(), text.capacity());
  copy = simdjson::padded_string(text);
  return simdjson::padded_string_view(copy);
}

bool simd_plain_string(const char* raw, std::string_view* out) {
  const char* end = raw;
  for (;; ++end) {
    const auto c = static_cast<unsigned char>(*end);
    if (c == '"') break;
    if (c == '\\' || c < 0x20) return false;
  }
  *out = std::string_view(raw, static_cast<size_t>(end - raw));
  return true;
}

bool simd_string_view(simdjson::ondemand::value v, std::string_view* out) {
  // Peeked first: a string that needs unescaping is then still there for get_string.
  const std::string_view token = v.raw_json_token();
  simdjson::ondemand::raw_json_string consumed;
  if (!token.empty() && token[0] == '"' && simd_plain_string(token.data() + 1, out))
    return !v.get_raw_json_string().get(consumed);
  return !v.get_string().get(*out);
}

bool simd_string(simdjson::ondemand::value v, std::string* out) {
  std::string_view s;
  if (!simd_string_view(v, &s)) return false;
  out->assign(s.data(), s.size());
  return true;
}

bool simd_sha256(simdjson::ondemand::value v, Sha256Digest* out) {
  std::string_view s;
  if (!simd_string_view(v, &s)) return false;
  const std::optional<Sha256Digest> digest = digest_from_hex(s);
  if (!digest) return false;
  *out = *digest;
  return true;
}

bool simd_uint(simdjson::ondemand::value v, uint64_t* out) {
  return !v.get_uint64().get(*out);
}

bool simd_int(simdjson::ondemand::value v, int64_t* out) {
  return !v.get_int64().get(*out);
}

namespace {

template <typename Extents>
bool simd_extents(simdjson::ondemand::value v, Extents* out, size_t max_len) {
  out->clear();
  return simd_each_element(v, [&](simdjson::ondemand::value e) {
    int64_t d = 0;
    if (e.get_int64().get(d) || d < 0 || out->size() == max_len) return false;
    out->push_back(d);
    return true;
  });
}

}  // namespace

bool simd_dims(simdjson::ondemand::value v, std::vector<int64_t>* out, size_t max_len) {
  return simd_extents(v, out, max_len);
}

bool simd_dims(simdjson::ondemand::value v, Dims* out, size_t max_len) {
  return simd_extents(v, out, max_len);
}

bool simd_object_tree(simdjson::ondemand::value v, nlohmann::json* out) {
  simdjson::ondemand::object o;
  std::string_view raw;
  if (v.get_object().get(o) || o.raw_json().get(raw)) return false;
  auto parsed = parse_json(std::string(raw), "metadata");
  if (!parsed.is_ok() || !parsed->is_object()) return false;
  *out = std::move(*parsed);
  return true;
}

}  // namespace ckpt
