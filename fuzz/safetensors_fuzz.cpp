// open_safetensors (formats/safetensors_file.h) on arbitrary bytes, then every payload it accepted.
// The custom mutator keeps the 8-byte header length in step with a header it mutates as JSON
// (deep nesting, awkward numbers, long strings), so mutations get past the length check.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "base/byte_coding.h"
#include "formats/safetensors_file.h"
#include "fuzz/fuzz_checks.h"
#include "fuzz/json_mutator.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  const uint64_t old_len = size >= 8 ? ckpt::decode_le(data, 8) : 0;
  if (size < 8 || old_len > size - 8 || rng() % 3 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const std::string tail(reinterpret_cast<const char*>(data) + 8 + old_len, size - 8 - old_len);
  std::string header(reinterpret_cast<const char*>(data) + 8, old_len);
  const size_t room = max_size > size ? max_size - size : 0;
  header.resize(old_len + room);
  header.resize(ckpt::fuzz::mutate_json(reinterpret_cast<uint8_t*>(header.data()), old_len, old_len + room,
                                        static_cast<unsigned>(rng())));
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  out += header + tail;
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ckpt::open_safetensors(ckpt::fuzz::memory_source(data, size));
  if (file.is_ok()) ckpt::fuzz::probe_tensor_file(**file, size);
  return 0;
}
