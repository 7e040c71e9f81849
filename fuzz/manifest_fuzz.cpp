// parse_manifest and manifest_digest (shards/manifest.h) on arbitrary text, and the fast path
// (shards/manifest_fast_parse.h) held to the reference path wherever it reads a text. The custom
// mutator (fuzz/json_mutator.h) inserts whole nests, balanced or not, around kMaxJsonDepth and far
// beyond it (200,000 levels: the depth that overflowed the stack), long strings and awkward numbers; run
// with -max_len=4000000 -len_control=0 (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz/fuzz_checks.h"
#include "fuzz/json_mutator.h"
#include "shards/manifest.h"
#include "shards/manifest_fast_parse.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return ckpt::fuzz::mutate_json(data, size, max_size, seed);
}

// Whatever the fast path reads (the writer's text a tensor at a time, or whole), the reference path
// reads too, with the same records and the same digest: the fast path may only leave a text to it.
void fast_path_agrees_with_the_reference(const std::string& text) {
  ckpt::ManifestDigest fast_digest;
  const std::optional<ckpt::Manifest> fast = ckpt::parse_manifest_fast(text, &fast_digest);
  if (!fast) return;
  ckpt::ManifestDigest reference_digest;
  const auto reference = ckpt::parse_manifest_reference(text, "<fuzz>", &reference_digest);
  if (!reference.is_ok()) ckpt::fuzz::invariant_broken("the fast path read a manifest the reference refuses");
  if (ckpt::manifest_to_json_text(*fast) != ckpt::manifest_to_json_text(*reference))
    ckpt::fuzz::invariant_broken("the fast path and the reference read different manifests");
  if (fast_digest.present != reference_digest.present || fast_digest.recorded != reference_digest.recorded ||
      fast_digest.computed != reference_digest.computed)
    ckpt::fuzz::invariant_broken("the fast path and the reference give different digests");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fast_path_agrees_with_the_reference(text);
  (void)ckpt::manifest_digest(text, "<fuzz>");
  auto manifest = ckpt::parse_manifest(text, "<fuzz>");
  // What verify and convert do with an accepted manifest: look tensors up, write it out again.
  if (manifest.is_ok() && !manifest->tensors.empty()) (void)manifest->find_tensor(manifest->tensors[0].name);
  if (manifest.is_ok()) (void)ckpt::manifest_to_json_text(*manifest);
  return 0;
}
