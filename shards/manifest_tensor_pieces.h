// Where, in a manifest laid out as the writer lays it out, the root's "tensors" array and each
// tensor in it lie, found without parsing: the parse then indexes one tensor at a time instead of
// the whole text (shards/manifest_fast_parse.h). simdjson's structural index of a whole 320k-chunk
// manifest is ~45 MB of fresh memory next to the 87 MB text, and `diff` holds one side's records
// while it parses the other's text (issue 44).
//
// What makes the layout safe to split on: a JSON string never holds a raw newline (a control
// character must be escaped), so a byte after a newline and spaces is always outside a string. The
// writer's pretty text (indent 1) puts the member ` "tensors": [` on a line of its own, each tensor's
// closing brace on a line "  }", and the array's `]` on a line " ]" near the end. Text laid out
// otherwise may match too, or split wrongly: the caller checks what it finds (each piece one whole
// JSON value, the array the root's "tensors" member) and otherwise parses the whole text.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ckpt {

struct TensorsArraySpan {
  size_t open = 0;   // offset of its '['
  size_t close = 0;  // offset of its ']'
};

// The writer's "tensors" array: the first line ` "tensors": [` and the last line " ]" within the
// text's last 256 bytes (what follows the array: "version" and "world_size"). nullopt otherwise,
// an empty array included (the writer puts "[]" on the member's line).
std::optional<TensorsArraySpan> find_writer_tensors_array(std::string_view text);

// The next tensor of that array at or after `from` (only whitespace before it): [begin, end) from
// its '{' to one past the first '}' that opens a line "  }". nullopt where there is none before
// `limit`, or something other than whitespace comes first.
struct TextPiece {
  size_t begin = 0;
  size_t end = 0;
};
std::optional<TextPiece> next_writer_tensor(std::string_view text, size_t from, size_t limit);

// Past the whitespace at `at`, before `limit`.
size_t skip_json_space(std::string_view text, size_t at, size_t limit);

}  // namespace ckpt
