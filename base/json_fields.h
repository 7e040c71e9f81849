// Strict, non-throwing access to fields of untrusted JSON (headers, manifests, index files).
// Every accessor names the field path and the expected type in its error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// Deepest nesting of arrays and objects accepted from a file. Real headers, manifests and configs
// nest fewer than ten levels; a hostile one nesting 200,000 levels would otherwise be parsed into a
// value whose recursive copy or destruction overflows the stack.
constexpr size_t kMaxJsonDepth = 128;

// Parses without exceptions; a syntax error, or nesting deeper than kMaxJsonDepth (checked on the
// text before parsing), becomes kCorruption naming `where` and the byte offset. Every JSON parse
// of bytes from a file or another process goes through here, JSON found inside strings included.
Result<nlohmann::json> parse_json(const std::string& text, const std::string& where);

// read_small_file + parse_json: a JSON file of at most `max_bytes`.
Result<nlohmann::json> read_json_file(const std::string& path, uint64_t max_bytes);

// For JSON this program wrote itself (drill reports, history lines): obj[key] when obj is an object
// holding key, else a null value, so a report from an older version renders with gaps instead of
// throwing.
const nlohmann::json& json_member_or_null(const nlohmann::json& obj, const char* key);

Result<const nlohmann::json*> json_field(const nlohmann::json& obj, const char* key,
                                         const std::string& where);
Result<std::string> json_string(const nlohmann::json& obj, const char* key, const std::string& where);
Result<int64_t> json_int(const nlohmann::json& obj, const char* key, const std::string& where);
Result<uint64_t> json_uint(const nlohmann::json& obj, const char* key, const std::string& where);
Result<double> json_number(const nlohmann::json& obj, const char* key, const std::string& where);
// An array of non-negative integers, at most `max_len` long (shapes, offsets).
Result<std::vector<int64_t>> json_dims(const nlohmann::json& obj, const char* key, const std::string& where,
                                       size_t max_len = 16);
Result<const nlohmann::json*> json_array(const nlohmann::json& obj, const char* key,
                                         const std::string& where);
Result<const nlohmann::json*> json_object(const nlohmann::json& obj, const char* key,
                                          const std::string& where);

}  // namespace ckpt
