#include "formats/tensor_file_open.h"

#include <cstring>
#include <vector>

#include "base/byte_coding.h"
#include "base/byte_source.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/pytorch_file.h"
#include "formats/safetensors_file.h"
#ifdef CKPTCHECK_WITH_HDF5
#include "formats/hdf5_file.h"
#endif

namespace ckpt {

namespace {

struct RegisteredOpener {
  const char* name;
  TensorFileSniffer sniff;
  TensorFileOpener open;
};

std::vector<RegisteredOpener>& registry() {
  static std::vector<RegisteredOpener> openers;
  return openers;
}

constexpr uint8_t kZipMagic[] = {'P', 'K', 3, 4};
constexpr uint8_t kHdf5Magic[] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr uint8_t kNativeMagic[] = {'C', 'K', 'P', 'T', 'S', 'H', 'D', 0};

bool starts_with(const uint8_t* head, size_t n, const uint8_t* magic, size_t m) {
  return n >= m && std::memcmp(head, magic, m) == 0;
}

// safetensors has no magic: a plausible header length, then the JSON object's '{'.
bool looks_like_safetensors(const uint8_t* head, size_t n, uint64_t file_size) {
  if (n < 9 || head[8] != '{') return false;
  const uint64_t len = decode_le64(head);
  return len >= 2 && len <= kSafetensorsMaxHeaderBytes && len <= file_size - 8;
}

}  // namespace

void register_tensor_file_opener(const char* name, TensorFileSniffer sniff, TensorFileOpener open) {
  registry().push_back({name, sniff, open});
}

Result<std::unique_ptr<TensorFile>> open_tensor_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  uint8_t head[kTensorFileSniffBytes] = {};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(source->size(), sizeof head));
  CKPT_RETURN_IF_ERROR(source->read_at(0, head, n));
  for (const auto& opener : registry()) {
    if (opener.sniff(head, n)) return opener.open(path);
  }
  if (starts_with(head, n, kZipMagic, sizeof kZipMagic)) return open_pytorch(std::move(source));
  if (starts_with(head, n, kHdf5Magic, sizeof kHdf5Magic)) {
#ifdef CKPTCHECK_WITH_HDF5
    return open_hdf5(path);
#else
    return Status::not_supported(path + ": HDF5 file, but ckptcheck was built without HDF5");
#endif
  }
  if (starts_with(head, n, kNativeMagic, sizeof kNativeMagic)) {
    CKPT_ASSIGN_OR_RETURN(auto native, open_native_shard(std::move(source)));
    return std::unique_ptr<TensorFile>(std::move(native));
  }
  if (looks_like_safetensors(head, n, source->size())) return open_safetensors(std::move(source));
  return Status::not_supported(path + ": unknown tensor file format (first bytes " + to_hex(head, n) + ")");
}

}  // namespace ckpt
