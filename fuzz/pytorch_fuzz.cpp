// open_pytorch (formats/pytorch_file.h), the whole torch.save reader: zip, data.pkl through the
// restricted pickle VM, storages located in the zip. Half the mutations are plain bytes (the zip's
// own structure); the other half unpack the archive, mutate data.pkl with the pickle mutator (memo
// chains over the seed's own tensors, deep nesting) and pack it again, since a pickle mutated in
// place inside a zip would no longer match the sizes recorded around it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "formats/pytorch_file.h"
#include "formats/zip_archive.h"
#include "fuzz/fuzz_checks.h"
#include "fuzz/pickle_mutator.h"
#include "fuzz/zip_writer.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  if (rng() % 2) return LLVMFuzzerMutate(data, size, max_size);
  const auto source = ckpt::fuzz::memory_source(data, size);
  auto zip = ckpt::ZipArchive::open(*source);
  if (!zip.is_ok()) return LLVMFuzzerMutate(data, size, max_size);
  ckpt::fuzz::ZipFiles files;
  size_t pickle_index = 0;
  bool has_pickle = false;
  for (const auto& entry : zip->entries()) {
    auto bytes = zip->read(*source, entry, max_size);
    if (!bytes.is_ok()) return LLVMFuzzerMutate(data, size, max_size);
    const bool is_pickle =
        entry.name.size() >= 9 && entry.name.compare(entry.name.size() - 9, 9, "/data.pkl") == 0;
    if (is_pickle && !has_pickle) {
      has_pickle = true;
      pickle_index = files.size();
    }
    files.emplace_back(entry.name, std::move(bytes.value()));
  }
  if (!has_pickle) return LLVMFuzzerMutate(data, size, max_size);
  std::string& pickle = files[pickle_index].second;
  const size_t room = max_size > size ? max_size - size : 0;
  const size_t old_size = pickle.size();
  pickle.resize(old_size + room);
  pickle.resize(ckpt::fuzz::mutate_pickle(reinterpret_cast<uint8_t*>(pickle.data()), old_size,
                                          old_size + room, static_cast<unsigned>(rng())));
  const std::string out = ckpt::fuzz::write_stored_zip(files);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ckpt::open_pytorch(ckpt::fuzz::memory_source(data, size));
  if (file.is_ok()) ckpt::fuzz::probe_tensor_file(**file, size);
  return 0;
}
