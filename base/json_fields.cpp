#include "base/json_fields.h"

#include "base/file_io.h"

namespace ckpt {

namespace {
Status wrong_type(const std::string& where, const char* key, const char* expected, const nlohmann::json& v) {
  return Status::corruption(where + ": field '" + key + "': expected " + expected + ", got " + v.type_name());
}

// The offset at which `text` first nests deeper than `max_depth`, or npos. Brackets inside strings
// do not count; the scan is linear and allocates nothing.
size_t first_offset_deeper_than(const std::string& text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string::npos;
}

}  // namespace

Result<nlohmann::json> parse_json(const std::string& text, const std::string& where) {
  const size_t deep = first_offset_deeper_than(text, kMaxJsonDepth);
  if (deep != std::string::npos) {
    return Status::corruption(where + " @" + std::to_string(deep) + ": JSON nests deeper than " +
                              std::to_string(kMaxJsonDepth) + " levels");
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::corruption(where + ": not valid JSON");
  return j;
}

Result<nlohmann::json> read_json_file(const std::string& path, uint64_t max_bytes) {
  CKPT_ASSIGN_OR_RETURN(std::string text, read_small_file(path, max_bytes));
  return parse_json(text, path);
}

Result<const nlohmann::json*> json_field(const nlohmann::json& obj, const char* key,
                                         const std::string& where) {
  if (!obj.is_object()) return Status::corruption(where + ": expected a JSON object, got " + obj.type_name());
  auto it = obj.find(key);
  if (it == obj.end()) return Status::corruption(where + ": missing field '" + key + "'");
  return &*it;
}

Result<std::string> json_string(const nlohmann::json& obj, const char* key, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (!v->is_string()) return wrong_type(where, key, "a string", *v);
  return v->get<std::string>();
}

Result<int64_t> json_int(const nlohmann::json& obj, const char* key, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return wrong_type(where, key, "an int64", *v);
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) return wrong_type(where, key, "an integer", *v);
  return v->get<int64_t>();
}

Result<uint64_t> json_uint(const nlohmann::json& obj, const char* key, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (!v->is_number_unsigned()) return wrong_type(where, key, "a non-negative integer", *v);
  return v->get<uint64_t>();
}

Result<double> json_number(const nlohmann::json& obj, const char* key, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (!v->is_number()) return wrong_type(where, key, "a number", *v);
  return v->get<double>();
}

Result<std::vector<int64_t>> json_dims(const nlohmann::json& obj, const char* key, const std::string& where,
                                       size_t max_len) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (!v->is_array()) return wrong_type(where, key, "an array of integers", *v);
  if (v->size() > max_len) {
    return Status::corruption(where + ": field '" + key + "' has " + std::to_string(v->size()) +
                              " dims, more than the limit of " + std::to_string(max_len));
  }
  std::vector<int64_t> dims;
  dims.reserve(v->size());
  for (const auto& d : *v) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Status::corruption(where + ": field '" + key + "': expected non-negative integers, got " +
                                d.dump());
    }
    dims.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  return dims;
}

Result<const nlohmann::json*> json_array(const nlohmann::json& obj, const char* key,
                                         const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (!v->is_array()) return wrong_type(where, key, "an array", *v);
  return v;
}

Result<const nlohmann::json*> json_object(const nlohmann::json& obj, const char* key,
                                          const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* v, json_field(obj, key, where));
  if (!v->is_object()) return wrong_type(where, key, "an object", *v);
  return v;
}

const nlohmann::json& json_member_or_null(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json null_value;
  return obj.is_object() && obj.contains(key) ? obj[key] : null_value;
}

}  // namespace ckpt
