// Strict, non-throwing access to fields of untrusted JSON (headers, manifests, index files).
// Every accessor names the field path and the expected type in its error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/status.h"

namespace ckpt {

// Parses without exceptions; a syntax error becomes kCorruption naming `where`.
Result<nlohmann::json> parse_json(const std::string& text, const std::string& where);

Result<const nlohmann::json*> json_field(const nlohmann::json& obj, const char* key, const std::string& where);
Result<std::string> json_string(const nlohmann::json& obj, const char* key, const std::string& where);
Result<int64_t> json_int(const nlohmann::json& obj, const char* key, const std::string& where);
Result<uint64_t> json_uint(const nlohmann::json& obj, const char* key, const std::string& where);
Result<double> json_number(const nlohmann::json& obj, const char* key, const std::string& where);
// An array of non-negative integers, at most `max_len` long (shapes, offsets).
Result<std::vector<int64_t>> json_dims(const nlohmann::json& obj, const char* key, const std::string& where,
                                       size_t max_len = 16);
Result<const nlohmann::json*> json_array(const nlohmann::json& obj, const char* key, const std::string& where);
Result<const nlohmann::json*> json_object(const nlohmann::json& obj, const char* key, const std::string& where);

}  // namespace ckpt
