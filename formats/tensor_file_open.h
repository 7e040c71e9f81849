// Opens any tensor file by what its first bytes say, not by its extension:
//   "PK\x03\x04"            -> PyTorch zip (torch.save)
//   legacy magic pickle     -> PyTorch legacy (pre-1.6) torch.save
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

constexpr size_t kTensorFileSniffBytes = 16;

// Lets a format living outside formats/tensor_file_open.cpp (the native shard format) be opened
// by open_tensor_file. Registered openers are tried before the built-in ones; `name` is for
// messages. Call at startup, before any open_tensor_file (not synchronized against it).
void register_tensor_file_opener(const char* name, TensorFileSniffer sniff, TensorFileOpener open);

// What a file's first bytes say it is (the built-in formats above; registered openers aside). The
// one rule open_tensor_file and verify's checkpoint kinds (verifier/check/checkpoint_kind.h) share.
enum class TensorFileFormat { kUnknown, kPytorchZip, kPytorchLegacy, kHdf5, kNative, kSafetensors };
TensorFileFormat sniff_tensor_file_format(const uint8_t* head, size_t n, uint64_t file_size);
// The same for a file on disk: kIoError when it cannot be read.
Result<TensorFileFormat> sniff_tensor_file_format(const std::string& path);

Result<std::unique_ptr<TensorFile>> open_tensor_file(const std::string& path);

}  // namespace ckpt
