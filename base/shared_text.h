// Text that many records hold the same: one copy, shared, never changed.
//
// Why not std::string: a DCP checkpoint's million storage items name ~60,000 tensors and a few
// files (issue 44). As std::string every item held its own copy of both names: 64 bytes and a heap
// block for a name over 15 bytes, ~100 MB at 1M items. A SharedText is one pointer pair; copies
// share the text.
//
// It reads as the std::string it holds (str(), or the implicit conversion for functions taking
// const std::string&) and compares and concatenates with std::string and string literals.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <utility>

namespace ckpt {

class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string text) : text_(std::make_shared<const std::string>(std::move(text))) {}  // NOLINT
  SharedText(const char* text) : SharedText(std::string(text)) {}                                // NOLINT

  const std::string& str() const { return text_ ? *text_ : empty_text(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads as the std::string it holds
  bool empty() const { return str().empty(); }
  size_t size() const { return str().size(); }

  friend bool operator==(const SharedText& a, const SharedText& b) {
    return a.text_ == b.text_ || a.str() == b.str();
  }
  friend bool operator==(const SharedText& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const std::string& a, const SharedText& b) { return a == b.str(); }
  friend bool operator==(const SharedText& a, const char* b) { return a.str() == b; }
  friend bool operator!=(const SharedText& a, const SharedText& b) { return !(a == b); }
  friend bool operator!=(const SharedText& a, const std::string& b) { return !(a == b); }
  friend bool operator!=(const std::string& a, const SharedText& b) { return !(a == b); }
  friend bool operator!=(const SharedText& a, const char* b) { return !(a == b); }
  friend bool operator<(const SharedText& a, const SharedText& b) { return a.str() < b.str(); }
  friend bool operator<(const SharedText& a, const std::string& b) { return a.str() < b; }
  friend bool operator<(const std::string& a, const SharedText& b) { return a < b.str(); }

  friend std::string operator+(const std::string& a, const SharedText& b) { return a + b.str(); }
  friend std::string operator+(std::string&& a, const SharedText& b) { return std::move(a) + b.str(); }
  friend std::string operator+(const char* a, const SharedText& b) { return a + b.str(); }
  friend std::string operator+(const SharedText& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const SharedText& a, const char* b) { return a.str() + b; }
  friend std::ostream& operator<<(std::ostream& out, const SharedText& t) { return out << t.str(); }

 private:
  static const std::string& empty_text() {
    static const std::string empty;
    return empty;
  }
  std::shared_ptr<const std::string> text_;
};

}  // namespace ckpt
