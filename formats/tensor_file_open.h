// Opens any tensor file by what its first bytes say, not by its extension:
//   "PK\x03\x04"            -> PyTorch zip (torch.save)
//   a tar header            -> refused: torch.load's pre-0.4 format, which we do not read
//   a pickle stream         -> PyTorch legacy (pre-1.6) torch.save, or a plain pickle
//   "\x89HDF\r\n\x1a\n"     -> HDF5
//   registered openers      -> e.g. the native format ("CKPTSHD\0"), which registers itself
//   u64 LE length, then '{' -> safetensors
// Anything else is kNotSupported with one line saying what the file is instead, when its first
// bytes tell (an empty file, a Git LFS pointer, an HTML page, an image, compressed data, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "formats/tensor_file.h"

namespace ckpt {

using TensorFileOpener = Result<std::unique_ptr<TensorFile>> (*)(const std::string& path);
using TensorFileSniffer = bool (*)(const uint8_t* head, size_t n);

constexpr size_t kTensorFileSniffBytes = 512;  // a tar header's block

// Lets a format living outside formats/tensor_file_open.cpp (the native shard format) be opened
// by open_tensor_file. Registered openers are tried before the built-in ones; `name` is for
// messages. Call at startup, before any open_tensor_file (not synchronized against it).
void register_tensor_file_opener(const char* name, TensorFileSniffer sniff, TensorFileOpener open);

// What a file's first bytes say it is (the built-in formats above; registered openers aside). The
// one rule open_tensor_file and verify's checkpoint kinds (verifier/check/checkpoint_kind.h) share.
//   kTar           what Python's tarfile opens: torch.load's pre-0.4 format, refused (ambiguous)
//   kPickleStream  (from bytes alone) starts with a pickle opcode: legacy or plain, decided by
//                  reading its first pickle (the path overload does; formats/torch_load_dispatch.h)
//   kPickle        a plain pickle that torch.load and pickle.load would run
enum class TensorFileFormat {
  kUnknown,
  kPytorchZip,
  kPytorchLegacy,
  kHdf5,
  kNative,
  kSafetensors,
  kTar,
  kPickleStream,
  kPickle,
  kNumpy  // numpy.save's .npy: an array, or an object array's pickle (formats/numpy_file.h)
};
TensorFileFormat sniff_tensor_file_format(const uint8_t* head, size_t n, uint64_t file_size);
// The same for a file on disk, a pickle stream resolved to kPytorchLegacy, kPickle or (nothing a
// loader would run) kUnknown: kIoError when it cannot be read.
Result<TensorFileFormat> sniff_tensor_file_format(const std::string& path);

Result<std::unique_ptr<TensorFile>> open_tensor_file(const std::string& path);

}  // namespace ckpt
