// read_tensor_pickle (formats/pickle_reader.h) on arbitrary bytes: it must return a Status, never
// crash, leak or hang. Run with -max_len=4000000 -len_control=0 (scripts/fuzz.sh) so the custom
// mutator may build memo chains and nesting a million levels deep (fuzz/pickle_mutator.h).
#include <cstddef>
#include <cstdint>

#include "formats/pickle_reader.h"
#include "fuzz/pickle_mutator.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return ckpt::fuzz::mutate_pickle(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto result = ckpt::read_tensor_pickle(data, size, "<fuzz>");
  if (result.is_ok()) (void)result.value().metadata.dump();
  return 0;
}
