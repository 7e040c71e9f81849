#include "base/text.h"

#include <cstdio>

namespace ckpt {

std::string quoted_for_message(const std::string& value) {
  if (value.size() <= 80) return "'" + value + "'";
  return "'" + value.substr(0, 64) + "...' (" + std::to_string(value.size()) + " characters)";
}

std::string hex_offset(uint64_t offset) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(offset));
  return buf;
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace ckpt
