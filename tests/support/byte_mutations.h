// Randomized mutation of a valid file for the "never crashes" tests of every parser. The count
// comes from CKPTCHECK_FUZZ_ITERATIONS (default 2000, 500 where an iteration is a process) so `make sanitize`
// can run more under ASan.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace ckpt {

// `default_count` lets a parser whose every iteration costs a process (HDF5, isolated) run fewer in
// `make test`; CKPTCHECK_FUZZ_ITERATIONS still sets them all.
inline int fuzz_iterations(int default_count = 2000) {
  const char* env = std::getenv("CKPTCHECK_FUZZ_ITERATIONS");
  const int n = env ? std::atoi(env) : 0;
  return n > 0 ? n : default_count;
}

// One defect per call: bit flips, a truncation, an overwrite with random or extreme bytes.
inline std::vector<uint8_t> mutate(std::vector<uint8_t> bytes, std::mt19937_64& rng) {
  if (bytes.empty()) return bytes;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  switch (rng() % 4) {
    case 0:
      for (int k = 0, n = 1 + pick(4); k < n; ++k)
        bytes[pick(bytes.size())] ^= static_cast<uint8_t>(1u << pick(8));
      break;
    case 1: bytes.resize(pick(bytes.size())); break;
    case 2: {
      const size_t at = pick(bytes.size());
      for (size_t k = 0, n = 1 + pick(8); k < n && at + k < bytes.size(); ++k)
        bytes[at + k] = static_cast<uint8_t>(rng());
      break;
    }
    default: {
      const size_t at = pick(bytes.size());
      const uint8_t fill = rng() % 2 ? 0xff : 0x00;
      for (size_t k = 0, n = 1 + pick(8); k < n && at + k < bytes.size(); ++k) bytes[at + k] = fill;
      break;
    }
  }
  return bytes;
}

inline std::vector<uint8_t> to_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace ckpt
