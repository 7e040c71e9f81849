#include "formats/tensor_file_open.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "base/byte_coding.h"
#include "base/byte_source.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "formats/numpy_file.h"
#include "formats/pytorch_file.h"
#include "formats/safetensors_file.h"
#include "formats/torch_load_dispatch.h"
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

// What a file that is no tensor file is, from its first bytes: the one-line answer a user needs
// (an LFS pointer committed in place of a shard, an HTML error page saved by a failed download).
std::string what_else(const uint8_t* head, size_t n) {
  auto starts = [&](const char* magic, size_t m) { return n >= m && std::memcmp(head, magic, m) == 0; };
  if (n == 0) return "an empty file (0 bytes)";
  if (starts("version https://git-lfs", 23))
    return "a Git LFS pointer, not the file: run `git lfs pull` (or `git lfs fetch`) to download it";
  size_t k = 0;  // HTML and XML may start with a BOM or blank lines
  if (starts("\xef\xbb\xbf", 3)) k = 3;
  while (k < n && (head[k] == ' ' || head[k] == '\t' || head[k] == '\r' || head[k] == '\n')) ++k;
  std::string text(reinterpret_cast<const char*>(head + k), std::min<size_t>(n - k, 64));
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text.rfind("<!doctype html", 0) == 0 || text.rfind("<html", 0) == 0 || text.rfind("<head", 0) == 0)
    return "an HTML page (an error or login page saved in place of the file?)";
  if (text.rfind("<?xml", 0) == 0) return "an XML document";
  if (starts("\x89PNG\r\n\x1a\n", 8)) return "a PNG image";
  if (starts("\xff\xd8\xff", 3)) return "a JPEG image";
  if (starts("GIF8", 4)) return "a GIF image";
  if (starts("%PDF", 4)) return "a PDF document";
  if (starts("\x1f\x8b", 2)) return "gzip-compressed data: decompress it first (gunzip, tar -xzf)";
  if (starts("\x28\xb5\x2f\xfd", 4)) return "zstd-compressed data: decompress it first (zstd -d)";
  if (starts("\xfd"
             "7zXZ\x00",
             6))
    return "xz-compressed data: decompress it first (xz -d)";
  if (starts("BZh", 3)) return "bzip2-compressed data: decompress it first (bunzip2)";
  if (starts("7z\xbc\xaf\x27\x1c", 6)) return "a 7-Zip archive: extract it first";
  if (n >= 262 && std::memcmp(head + 257, "ustar", 5) == 0)
    return "a tar archive: extract it first (tar -xf)";
  if (starts("\x7f"
             "ELF",
             4))
    return "an ELF executable or library";
  if (starts("GGUF", 4)) return "a GGUF file (llama.cpp), which ckptcheck does not read";
  if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5)
    return "a pickle that CPython's unpickler rejects before it names any global (so nothing a loader "
           "would run), not a torch.save file";
  if (head[k < n ? k : 0] == '{' || head[k < n ? k : 0] == '[') return "a JSON document (or other text)";
  bool printable = true;
  for (size_t i = 0; i < n; ++i) {
    printable = printable && (head[i] >= 0x20 || head[i] == '\n' || head[i] == '\r' || head[i] == '\t');
  }
  if (printable) return "a text file";
  return "";
}

// safetensors has no magic: a plausible header length, then the JSON object's '{'.
bool looks_like_safetensors(const uint8_t* head, size_t n, uint64_t file_size) {
  if (n < 9 || head[8] != '{') return false;
  const uint64_t len = decode_le64(head);
  return len >= 2 && len <= kSafetensorsMaxHeaderBytes && len <= file_size - 8;
}

// A file with a magic of its own whose first byte is also a pickle opcode (ckptcheck's "CKPTSHD\0"
// starts with SHORT_BINBYTES; a safetensors header length may start with any byte): torch.load and
// pickle.load read it as a pickle stream. If that reading names a global, the file is a polyglot a
// loader would run: it is judged as the pickle (the gate names the call), never passed as its other
// format. A file of the format itself fails that reading before naming anything.
bool runs_as_pickle_too(TensorFileFormat format, const uint8_t* head, size_t n, const ByteSource& source) {
  if (format != TensorFileFormat::kNative && format != TensorFileFormat::kSafetensors) return false;
  return n > 0 && is_pickle_opcode(head[0]) && probe_pickle_stream(source).names_globals;
}

}  // namespace

// In torch.load's order where it has one (formats/torch_load_dispatch.h): a zip, then a tar, then
// the formats with a magic of their own, then a pickle stream.
TensorFileFormat sniff_tensor_file_format(const uint8_t* head, size_t n, uint64_t file_size) {
  if (starts_with(head, n, kZipMagic, sizeof kZipMagic)) return TensorFileFormat::kPytorchZip;
  if (tarfile_would_open(head, n)) return TensorFileFormat::kTar;
  if (starts_with(head, n, kHdf5Magic, sizeof kHdf5Magic)) return TensorFileFormat::kHdf5;
  if (starts_with(head, n, kNativeMagic, sizeof kNativeMagic)) return TensorFileFormat::kNative;
  if (looks_like_safetensors(head, n, file_size)) return TensorFileFormat::kSafetensors;
  if (starts_with(head, n, kNumpyMagic, sizeof kNumpyMagic)) return TensorFileFormat::kNumpy;
  if (n > 0 && is_pickle_opcode(head[0])) return TensorFileFormat::kPickleStream;
  return TensorFileFormat::kUnknown;
}

Result<TensorFileFormat> sniff_tensor_file_format(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  uint8_t head[kTensorFileSniffBytes] = {};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(source->size(), sizeof head));
  CKPT_RETURN_IF_ERROR(source->read_at(0, head, n));
  TensorFileFormat format = sniff_tensor_file_format(head, n, source->size());
  if (format == TensorFileFormat::kPickleStream) {
    switch (pickle_stream_route(*source)) {
      case PickleStreamRoute::kLegacy: return TensorFileFormat::kPytorchLegacy;
      case PickleStreamRoute::kPlain: return TensorFileFormat::kPickle;
      case PickleStreamRoute::kNone: return TensorFileFormat::kUnknown;
    }
  }
  if (runs_as_pickle_too(format, head, n, *source)) return TensorFileFormat::kPickle;
  return format;
}

void register_tensor_file_opener(const char* name, TensorFileSniffer sniff, TensorFileOpener open) {
  registry().push_back({name, sniff, open});
}

Result<std::unique_ptr<TensorFile>> open_tensor_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  uint8_t head[kTensorFileSniffBytes] = {};  // a tar header is 512 bytes
  const size_t n = static_cast<size_t>(std::min<uint64_t>(source->size(), sizeof head));
  CKPT_RETURN_IF_ERROR(source->read_at(0, head, n));
  const TensorFileFormat sniffed = sniff_tensor_file_format(head, n, source->size());
  if (runs_as_pickle_too(sniffed, head, n, *source)) return open_pytorch_legacy(std::move(source));
  for (const auto& opener : registry()) {
    if (opener.sniff(head, n)) return opener.open(path);
  }
  switch (sniffed) {
    case TensorFileFormat::kPytorchZip: return open_pytorch(std::move(source));
    case TensorFileFormat::kTar:
      return Status::ambiguous(
          path +
          ": a tar archive to Python's tarfile, which torch.load tries before the pickle "
          "stream (its pre-0.4 format): ckptcheck reads no tar, so it cannot say what "
          "torch.load would run; refused (extract it, or re-save with torch.save)");
    case TensorFileFormat::kPickleStream:
      if (pickle_stream_route(*source) == PickleStreamRoute::kNone) break;  // nothing a loader runs
      return open_pytorch_legacy(std::move(source));
    case TensorFileFormat::kPytorchLegacy:
    case TensorFileFormat::kPickle: return open_pytorch_legacy(std::move(source));
    case TensorFileFormat::kNumpy: return open_numpy(std::move(source));
    case TensorFileFormat::kHdf5:
#ifdef CKPTCHECK_WITH_HDF5
      return open_hdf5(path);
#else
      return Status::not_supported(path + ": HDF5 file, but ckptcheck was built without HDF5");
#endif
    case TensorFileFormat::kNative: {
      CKPT_ASSIGN_OR_RETURN(auto native, open_native_shard(std::move(source)));
      return std::unique_ptr<TensorFile>(std::move(native));
    }
    case TensorFileFormat::kSafetensors: return open_safetensors(std::move(source));
    case TensorFileFormat::kUnknown: break;
  }
  const std::string what = what_else(head, n);
  if (!what.empty()) return Status::not_supported(path + ": " + what + ", not a tensor file");
  return Status::not_supported(path + ": unknown tensor file format (first bytes " +
                               to_hex(head, std::min<size_t>(n, 16)) + ")");
}

}  // namespace ckpt
