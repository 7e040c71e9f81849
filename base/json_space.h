// The whitespace JSON allows between tokens (RFC 8259: space, tab, line feed, carriage return),
// for code that walks JSON text without a parser: the manifest's own digest read off its text
// (base/embedded_digest.h) and the writer's layout split into tensors
// (shards/manifest_tensor_pieces.h) must agree on what lies between tokens.
#pragma once

namespace ckpt {

inline bool is_json_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace ckpt
