// PyTorch's torch.save files (.pt/.pth/.bin, the zip format since torch 1.6), read without torch:
//   <archive>/data.pkl      the pickled object (protocol 2), read by formats/pickle_reader.h
//   <archive>/data/<key>    one stored entry per storage, raw little-endian elements
//   <archive>/version, <archive>/byteorder ("little"; absent in older files)
// Each tensor becomes one whole-tensor chunk whose data_offset points into its storage's entry.
#pragma once

#include <memory>
#include <string>

#include "base/byte_source.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr uint64_t kPytorchMaxPickleBytes = 256ull << 20;

Result<std::unique_ptr<TensorFile>> open_pytorch(std::unique_ptr<ByteSource> source);
Result<std::unique_ptr<TensorFile>> open_pytorch_file(const std::string& path);

}  // namespace ckpt
