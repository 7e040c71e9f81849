// Typed fields of a document parsed by simdjson, for the fast paths of the large metadata files
// (manifests, native shard headers; issue 44). Each getter returns false when the value is not
// exactly what the strict nlohmann accessors of base/json_fields.h accept, so the caller can hand
// the document to the nlohmann path, whose error messages are the reference.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ckpt {

// Deepest nesting the fast paths take (below kMaxJsonDepth, so the depth refusal stays the
// reference path's).
constexpr size_t kMaxFastJsonDepth = 64;

// Parses `text` into `parser` (sized for it): the parser's buffers in huge pages (base/huge_pages.h),
// and the text parsed in place, not copied, when its capacity holds simdjson's padding
// (read_small_file leaves that room). Returns the root, or false for anything simdjson refuses.
bool simd_parse(simdjson::dom::parser& parser, const std::string& text, simdjson::dom::element* root);

bool simd_string(const simdjson::dom::object& o, const char* key, std::string* out);
bool simd_uint(const simdjson::dom::object& o, const char* key, uint64_t* out);
bool simd_int(const simdjson::dom::object& o, const char* key, int64_t* out);
// An array of at most `max_len` non-negative integers (json_dims).
bool simd_dims(const simdjson::dom::object& o, const char* key, std::vector<int64_t>* out,
               size_t max_len = 16);
// The tree nlohmann's parser builds from the same text (non-negative integers unsigned, negative
// ones signed); false for a repeated key or nesting deeper than kMaxFastJsonDepth.
bool simd_to_nlohmann(const simdjson::dom::element& e, nlohmann::json* out, size_t depth = 0);

}  // namespace ckpt
