// Small text helpers: prefix and suffix tests (C++17 has neither on std::string), and escaping
// for HTML and SVG reports.
#pragma once

#include <cstdint>
#include <string>

namespace ckpt {

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An untrusted value in a one-line message: quoted, whole up to 80 characters, else its first 64,
// "..." and its length ("'abc...' (100000 characters)"), so a hostile field cannot flood the line.
std::string quoted_for_message(const std::string& value);

// "0x1a2b": how messages name a byte offset in a file.
std::string hex_offset(uint64_t offset);

// Text safe in HTML/SVG character data and attribute values (& < > " ' escaped): report strings
// come from files on disk (tensor names, error messages) and are never markup.
std::string html_escape(const std::string& text);

}  // namespace ckpt
