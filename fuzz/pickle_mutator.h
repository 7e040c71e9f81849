// The structure-aware half of the pickle mutations (pickle_fuzz, and pytorch_fuzz on data.pkl).
// A 28-million-execution run of plain libFuzzer never built a memo chain and never grew an input
// past a few KB, so the real crashes (memo chains, deep nesting) stayed out of reach. Here one
// mutation in three builds such a shape from pickle_shapes.h: alone, wrapped around the input's own
// value (so chains point at the seed's tensors), or spliced in at an opcode boundary.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "fuzz/pickle_shapes.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace ckpt::fuzz {

// Log-uniform in [1, limit], with the boundaries the reader cares about (kPickleMaxNesting = 32,
// one-byte memo keys) drawn more often than chance would.
inline size_t pick_count(std::minstd_rand& rng, size_t limit) {
  static constexpr size_t kEdges[] = {1, 2, 31, 32, 33, 255, 256, 257, 100'000, 100'001};
  if (limit <= 1) return 1;
  if (rng() % 4 == 0) return std::min(limit, kEdges[rng() % (sizeof kEdges / sizeof kEdges[0])]);
  size_t bits = 0;
  while ((size_t{2} << bits) <= limit) ++bits;
  const size_t lo = size_t{1} << (rng() % (bits + 1));
  return std::min(limit, lo + rng() % lo);
}

// A generated value program whose length stays under about `budget` bytes.
inline std::string pickle_shape(std::minstd_rand& rng, size_t budget, const PickleWalk& seed) {
  const auto key = static_cast<uint32_t>(0x40000000u + rng() % 0x1000000u);
  // The chain's leaf: one of the seed's own memoized values (often a tensor), or a fresh one.
  std::string leaf;
  switch (seed.memo_keys.empty() ? 1 + rng() % 4 : rng() % 5) {
    case 0: leaf = op_binget(seed.memo_keys[rng() % seed.memo_keys.size()]); break;
    case 1: leaf = tensor_value(std::to_string(rng() % 4), 1 + rng() % 8); break;
    case 2: leaf = "]"; break;
    case 3: leaf = long_string(pick_count(rng, std::min<size_t>(budget / 2 + 1, 1 << 16))); break;
    default: leaf = op_int(static_cast<int64_t>(rng())); break;
  }
  switch (rng() % 8) {
    case 0: return memo_chain(leaf, pick_count(rng, 48), key);
    case 1: return memo_dict_chain(leaf, pick_count(rng, 48), key);
    case 2: return list_nest(pick_count(rng, budget / 2 + 1));
    case 3: return mark_tuple_nest(pick_count(rng, budget / 2 + 1));
    case 4: return mark_list_nest(pick_count(rng, budget / 3 + 1));
    case 5: return self_cycle(key);
    case 6:
      return fan_out(memo_chain(leaf, pick_count(rng, 24), key + 1), pick_count(rng, budget / 8 + 1), key);
    default: return memo_flood(pick_count(rng, budget / 6 + 1), key);
  }
}

// One mutation of `data` in place; returns the new size (at most max_size).
inline size_t mutate_pickle(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  const unsigned choice = rng() % 3 == 0 ? rng() % 3 : 3;
  if (choice == 3 || max_size < 64) return LLVMFuzzerMutate(data, size, max_size);
  const PickleWalk walk = walk_pickle(data, size);
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t budget = max_size - std::min<size_t>(max_size, size + 64);
  std::string out;
  switch (choice) {
    case 0: out = pickle_program("x", pickle_shape(rng, max_size - 32, walk)); break;
    case 1: out = wrap_pickle_root(input, pickle_shape(rng, budget, walk)); break;
    default: {  // splice a stack-neutral fragment (value, POP) in at an opcode boundary
      if (walk.boundaries.empty()) break;
      const size_t at = walk.boundaries[rng() % walk.boundaries.size()];
      out = input.substr(0, at) + pickle_shape(rng, budget, walk) + "0" + input.substr(at);
      break;
    }
  }
  if (out.empty() || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace ckpt::fuzz
