// Structure-aware JSON mutations (manifest_fuzz, and the JSON headers of safetensors_fuzz and
// native_shard_fuzz). Byte-level mutation grows a nest by one bracket at a time and rarely keeps
// the text valid, so it never reached the depth that overflowed the stack (200,000 levels) nor the
// boundary of kMaxJsonDepth (128). One mutation in three here inserts a whole nest, balanced and
// inside a valid position, or a long string, or a number or escape the parsers find awkward.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace ckpt::fuzz {

// Log-uniform in [1, limit], with the depths around kMaxJsonDepth (128) drawn often.
inline size_t pick_depth(std::minstd_rand& rng, size_t limit) {
  static constexpr size_t kEdges[] = {120, 126, 127, 128, 129, 130, 200'000};
  if (limit <= 1) return 1;
  if (rng() % 2 == 0) return std::min(limit, kEdges[rng() % (sizeof kEdges / sizeof kEdges[0])]);
  size_t bits = 0;
  while ((size_t{2} << bits) <= limit) ++bits;
  const size_t lo = size_t{1} << (rng() % (bits + 1));
  return std::min(limit, lo + rng() % lo);
}

// A complete JSON value nesting `depth` levels.
inline std::string json_nest(std::minstd_rand& rng, size_t depth) {
  switch (rng() % 3) {
    case 0: return std::string(depth, '[') + std::string(depth, ']');
    case 1: {
      std::string s;
      s.reserve(depth * 7 + 1);
      for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
      return s + "1" + std::string(depth, '}');
    }
    default: {  // alternating, with a string holding brackets that must not count
      std::string s;
      for (size_t i = 0; i < depth; ++i) s += i % 2 ? "{\"[\":" : "[";
      s += "\"]]}}\\\"[[\"";
      for (size_t i = depth; i-- > 0;) s += i % 2 ? "}" : "]";
      return s;
    }
  }
}

inline std::string json_awkward_token(std::minstd_rand& rng, size_t budget) {
  static const char* const kTokens[] = {"1e999999",
                                        "-1e-999999",
                                        "18446744073709551616",
                                        "-9223372036854775809",
                                        "9223372036854775807",
                                        "-0",
                                        "0.5",
                                        "\"\\ud800\"",
                                        "\"\\u0000\"",
                                        "\"a\\/b\"",
                                        "\"../../etc/x\"",
                                        "\"/abs\"",
                                        "null",
                                        "true",
                                        "[]",
                                        "{}",
                                        "\"\"",
                                        "\"F32\"",
                                        "\"BF16\"",
                                        "4294967296"};
  if (rng() % 4 == 0) return "\"" + std::string(std::min<size_t>(budget, 1 + rng() % (1 << 20)), 'a') + "\"";
  return kTokens[rng() % (sizeof kTokens / sizeof kTokens[0])];
}

// One mutation of JSON text in place; returns the new size (at most max_size).
inline size_t mutate_json(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  if (rng() % 3 != 0 || max_size < 16) return LLVMFuzzerMutate(data, size, max_size);
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t room = max_size - std::min(max_size, size);
  // Positions where a value may start: right after '[' (then a ',' follows the insert) or after ':'.
  std::vector<size_t> opens, colons;
  for (size_t i = 0; i < size; ++i) {
    if (input[i] == '[') opens.push_back(i + 1);
    if (input[i] == ':') colons.push_back(i + 1);
  }
  std::string out;
  switch (rng() % 5) {
    case 0: {  // a nest as a new first array element
      if (opens.empty() || room < 8) break;
      out = input;
      out.insert(opens[rng() % opens.size()], json_nest(rng, pick_depth(rng, (room - 2) / 7 + 1)) + ",");
      break;
    }
    case 1: {  // a nest replacing an object member's value (the old value stays as a new member)
      if (colons.empty() || room < 16) break;
      out = input;
      out.insert(colons[rng() % colons.size()], json_nest(rng, pick_depth(rng, (room - 8) / 7 + 1)) + ",\"z" +
                                                    std::to_string(rng()) + "\":");
      break;
    }
    case 2: {  // the whole text wrapped
      if (room < 8) break;
      const size_t depth = pick_depth(rng, (room - 2) / 6 + 1);
      if (rng() % 2)
        out = std::string(depth, '[') + input + std::string(depth, ']');
      else {
        for (size_t i = 0; i < depth; ++i) out += "{\"w\":";
        out += input + std::string(depth, '}');
      }
      break;
    }
    case 3: {  // an awkward value after a ':' (again keeping the old one as a member)
      if (colons.empty() || room < 32) break;
      out = input;
      out.insert(colons[rng() % colons.size()], json_awkward_token(rng, room - 24) + ",\"y\":");
      break;
    }
    default: {  // unbalanced openers anywhere (what the depth scan must stop before parsing)
      if (room < 2) break;
      out = input;
      out.insert(rng() % (size + 1), std::string(pick_depth(rng, room), rng() % 2 ? '[' : '{'));
      break;
    }
  }
  if (out.empty() || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace ckpt::fuzz
