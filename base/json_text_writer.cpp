#include "base/json_text_writer.h"

#include <cstring>

namespace ckpt {

JsonTextWriter::JsonTextWriter(std::shared_ptr<TextSink> sink, int indent)
    : sink_(sink), indent_(indent), json_(sink, ' ', nlohmann::json::error_handler_t::strict) {}

void JsonTextWriter::newline() {
  sink_->write_character('\n');
  for (int i = 0; i < depth_ * indent_; ++i) sink_->write_character(' ');
}

void JsonTextWriter::open(char c) {
  sink_->write_character(c);
  ++depth_;
}

void JsonTextWriter::close(char c) {
  --depth_;
  if (indent_ >= 0) newline();
  sink_->write_character(c);
}

void JsonTextWriter::element(bool first) {
  if (!first) sink_->write_character(',');
  if (indent_ >= 0) newline();
}

void JsonTextWriter::key(const char* name, bool first) {
  element(first);
  string(name);
  put(indent_ >= 0 ? ": " : ":");
}

void JsonTextWriter::string(const char* s) {
  string(s, std::strlen(s));
}

bool is_plain_json_string(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\') return false;
  }
  return true;
}

void JsonTextWriter::string(const char* s, size_t n) {
  // Plain ASCII as is; anything else goes through nlohmann's own serializer, so the bytes and the
  // errors are its own.
  if (!is_plain_json_string(s, n)) {
    json_.dump(nlohmann::json(std::string(s, n)), false, false, 0);
    return;
  }
  sink_->write_character('"');
  sink_->write_characters(s, n);
  sink_->write_character('"');
}

void JsonTextWriter::dims(DimsView d) {
  if (d.empty()) {
    put("[]");
    return;
  }
  open('[');
  for (size_t i = 0; i < d.size(); ++i) {
    element(i == 0);
    number(d[i]);
  }
  close(']');
}

void JsonTextWriter::value(const nlohmann::json& j) {
  if (indent_ >= 0) {
    json_.dump(j, true, false, static_cast<unsigned>(indent_), static_cast<unsigned>(depth_ * indent_));
  } else {
    json_.dump(j, false, false, 0);
  }
}

void JsonTextWriter::put(const char* s) {
  sink_->write_characters(s, std::strlen(s));
}

}  // namespace ckpt
