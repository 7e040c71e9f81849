#include "base/embedded_digest.h"

#include <cstring>
#include <memory>

#include "base/json_fields.h"
#include "base/json_space.h"
#include "base/sha256.h"
#include "base/sha256_output.h"

namespace ckpt {

namespace {

// nlohmann's compact dump() written straight into SHA-256: the same bytes as sha256_hex(j.dump()),
// without holding the whole canonical text in memory.
std::string sha256_of_compact_dump(const nlohmann::json& j) {
  Sha256 hash;
  auto out = std::make_shared<Sha256Output>(hash);
  nlohmann::detail::serializer<nlohmann::json> serializer(out, ' ', nlohmann::json::error_handler_t::strict);
  serializer.dump(j, /*pretty_print=*/false, /*ensure_ascii=*/false, /*indent_step=*/0);
  out->flush();
  return hash.finish_hex();
}

// Bytes between tokens, outside strings, where a run of plain value characters (digits, ':',
// literals) ends.
bool ends_plain_run(char c) {
  return is_json_space(c) || c == '"' || c == ',' || c == '{' || c == '}' || c == '[' || c == ']';
}

// One past the closing quote of the string that opens at text[start], or npos when it never closes.
size_t string_end(std::string_view text, size_t start) {
  size_t at = start + 1;
  for (;;) {
    const void* quote = std::memchr(text.data() + at, '"', text.size() - at);
    if (!quote) return std::string_view::npos;
    const size_t q = static_cast<size_t>(static_cast<const char*>(quote) - text.data());
    size_t backslashes = 0;
    while (q - backslashes > start + 1 && text[q - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return q + 1;
    at = q + 1;
  }
}

}  // namespace

void embed_digest(nlohmann::json& j, const char* field) {
  j.erase(field);
  const std::string digest = sha256_of_compact_dump(j);
  j[field] = digest;
}

Result<EmbeddedDigest> read_embedded_digest(const std::string& text, const char* field,
                                            const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(text, where));
  if (!j.is_object()) return Status::corruption(where + ": expected a JSON object");
  return take_embedded_digest(j, field);
}

EmbeddedDigest take_embedded_digest(nlohmann::json& j, const char* field) {
  EmbeddedDigest d;
  auto it = j.find(field);
  if (it == j.end()) return d;
  d.present = true;
  d.recorded = it->is_string() ? it->get<std::string>() : it->dump();
  j.erase(it);
  d.computed = sha256_of_compact_dump(j);
  return d;
}

std::optional<std::string> sha256_without_whitespace(std::string_view text, const char* field) {
  const std::string_view left_out = field;
  const size_t n = text.size();
  Sha256 hash;
  // What is kept of the text goes to the hasher in 64 KiB blocks (on the heap: this may run on a
  // worker thread's stack).
  auto out = std::make_unique<Sha256Output>(hash);
  size_t i = 0;
  auto skip_space = [&] {
    while (i < n && is_json_space(text[i])) ++i;
  };
  int depth = 0;
  bool root_closed = false;
  bool key_next = false;  // in the root object, the next string is a member's key
  // The root's commas are written when the next key is known: the one before the member left out
  // goes with it, and when that member is the first, the comma after it goes instead.
  bool comma_pending = false;
  bool drop_next_comma = false;
  while (i < n) {
    const char c = text[i];
    if (is_json_space(c)) {
      ++i;
      continue;
    }
    if (root_closed) return std::nullopt;  // text after the root object
    if (depth == 0 && c != '{') return std::nullopt;
    switch (c) {
      case '"': {
        size_t end = string_end(text, i);
        if (end == std::string_view::npos) return std::nullopt;
        if (depth == 1 && key_next) {
          key_next = false;
          if (text.substr(i + 1, end - i - 2) == left_out) {
            i = end;
            skip_space();
            if (i >= n || text[i] != ':') return std::nullopt;
            ++i;
            skip_space();
            if (i >= n || text[i] != '"') return std::nullopt;
            end = string_end(text, i);
            if (end == std::string_view::npos) return std::nullopt;
            i = end;
            if (comma_pending) {
              comma_pending = false;
            } else {
              drop_next_comma = true;
            }
            continue;
          }
          if (comma_pending) out->write_characters(",", 1);
          comma_pending = false;
        }
        out->write_characters(text.data() + i, end - i);
        i = end;
        break;
      }
      case ',':
        if (depth == 1) {
          if (comma_pending || key_next) return std::nullopt;
          if (drop_next_comma) {
            drop_next_comma = false;
          } else {
            comma_pending = true;
          }
          key_next = true;
        } else {
          out->write_characters(",", 1);
        }
        ++i;
        break;
      case '{':
      case '[':
        if (++depth == 1) key_next = true;
        out->write_characters(&text[i], 1);
        ++i;
        break;
      case '}':
      case ']':
        if (depth == 1 && comma_pending) return std::nullopt;  // a comma before the close
        if (depth == 1) drop_next_comma = false;               // the member left out was the only one
        if (--depth == 0) root_closed = true;
        out->write_characters(&text[i], 1);
        ++i;
        break;
      default: {
        size_t end = i + 1;
        while (end < n && !ends_plain_run(text[end])) ++end;
        out->write_characters(text.data() + i, end - i);
        i = end;
      }
    }
  }
  if (!root_closed) return std::nullopt;
  out->flush();
  return hash.finish_hex();
}

}  // namespace ckpt
