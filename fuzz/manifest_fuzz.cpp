// parse_manifest and manifest_digest (shards/manifest.h) on arbitrary text. The custom mutator
// (fuzz/json_mutator.h) inserts whole nests, balanced or not, around kMaxJsonDepth and far beyond
// it (200,000 levels: the depth that overflowed the stack), long strings and awkward numbers; run
// with -max_len=4000000 -len_control=0 (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/json_mutator.h"
#include "shards/manifest.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return ckpt::fuzz::mutate_json(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)ckpt::manifest_digest(text, "<fuzz>");
  auto manifest = ckpt::parse_manifest(text, "<fuzz>");
  // What verify and convert do with an accepted manifest: look tensors up, write it out again.
  if (manifest.is_ok() && !manifest->tensors.empty()) (void)manifest->find_tensor(manifest->tensors[0].name);
  if (manifest.is_ok()) (void)ckpt::manifest_to_json_text(*manifest);
  return 0;
}
