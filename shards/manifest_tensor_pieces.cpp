#include "shards/manifest_tensor_pieces.h"

#include <cstring>

#include "base/json_space.h"

namespace ckpt {

namespace {

constexpr std::string_view kTensorsLine = "\n \"tensors\": [\n";
constexpr std::string_view kArrayEndLine = "\n ]";
constexpr std::string_view kTensorEndLine = "\n  }";
// "version" and "world_size" follow the array: a few dozen bytes in the writer's text.
constexpr size_t kSuffixWindow = 256;

}  // namespace

size_t skip_json_space(std::string_view text, size_t at, size_t limit) {
  while (at < limit && is_json_space(text[at])) ++at;
  return at;
}

std::optional<TensorsArraySpan> find_writer_tensors_array(std::string_view text) {
  const size_t line = text.find(kTensorsLine);
  if (line == std::string_view::npos) return std::nullopt;
  TensorsArraySpan span;
  span.open = line + kTensorsLine.size() - 2;  // the '[' before the line's newline
  const size_t window = text.size() > kSuffixWindow ? text.size() - kSuffixWindow : 0;
  const size_t end_line = text.substr(window).rfind(kArrayEndLine);
  if (end_line == std::string_view::npos || window + end_line <= span.open) return std::nullopt;
  span.close = window + end_line + kArrayEndLine.size() - 1;
  return span;
}

std::optional<TextPiece> next_writer_tensor(std::string_view text, size_t from, size_t limit) {
  const size_t begin = skip_json_space(text, from, limit);
  if (begin >= limit || text[begin] != '{') return std::nullopt;
  // memchr for the braces: ~one a chunk (each chunk's own, four spaces in), so the scan runs at
  // memchr's speed rather than a byte at a time over the 87 MB.
  size_t at = begin + 1;
  while (at < limit) {
    const void* brace = std::memchr(text.data() + at, '}', limit - at);
    if (!brace) return std::nullopt;
    const size_t b = static_cast<size_t>(static_cast<const char*>(brace) - text.data());
    if (b >= begin + kTensorEndLine.size() &&
        text.compare(b - (kTensorEndLine.size() - 1), kTensorEndLine.size() - 1,
                     kTensorEndLine.substr(0, 3)) == 0)
      return TextPiece{begin, b + 1};
    at = b + 1;
  }
  return std::nullopt;
}

}  // namespace ckpt
