// JSON text written straight from a document's fields: byte for byte what nlohmann::json's dump()
// gives for the same values, compact (indent < 0) or pretty, without building the json object
// first. The caller writes keys in dump()'s order (sorted). Why: the object of a manifest or a
// native shard header of 20,000-320,000 chunks was 12-14x its text in memory and most of the time
// of writing it (issue 44); the text is what the readers and the digests need.
#pragma once

#include <charconv>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/dims.h"

namespace ckpt {

// Whether dump() writes `s` as it is between quotes: plain printable ASCII, no quote or backslash.
// Anything else (escapes, UTF-8, which nlohmann checks) is nlohmann's to write.
bool is_plain_json_string(const char* s, size_t n);

// Where the text goes: a string (nlohmann's own adapter) or SHA-256 (base/sha256_output.h).
using TextSink = nlohmann::detail::output_adapter_protocol<char>;

class JsonTextWriter {
 public:
  JsonTextWriter(std::shared_ptr<TextSink> sink, int indent);

  void open(char c);   // '{' or '['
  void close(char c);  // '}' or ']'
  // Before each object member or array element: a comma after the first, then the line break.
  void element(bool first);
  void key(const char* name, bool first = false);
  void string(const std::string& s) { string(s.data(), s.size()); }
  void string(const char* s);
  void string(const char* s, size_t n);
  template <typename Int>
  void number(Int v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
    sink_->write_characters(buf, static_cast<size_t>(end - buf));
  }
  void dims(DimsView d);
  // Any json value, as dump() writes it at this depth.
  void value(const nlohmann::json& j);
  void put(const char* s);

 private:
  void newline();

  std::shared_ptr<TextSink> sink_;
  int indent_;
  int depth_ = 0;
  nlohmann::detail::serializer<nlohmann::json> json_;
};

}  // namespace ckpt
