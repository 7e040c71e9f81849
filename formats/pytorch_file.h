// PyTorch's torch.save files (.pt/.pth/.bin/.ckpt), read without torch.
//
// The zip format (torch >= 1.6):
//   <archive>/data.pkl      the pickled object (protocol 2), read by formats/pickle_reader.h
//   <archive>/data/<key>    one stored entry per storage, raw little-endian elements
//   <archive>/version, <archive>/byteorder ("little"; absent in older files)
// The legacy format (torch < 1.6, or _use_new_zipfile_serialization=False), one stream:
//   pickle MAGIC (0x1950a86a20f9469cfc6c) | pickle 1001 | pickle sys_info dict | the object pickle,
//   whose persistent ids carry a view as a sixth item | pickle: the sorted storage keys |
//   per key in that order: numel as u64 little-endian, then numel * element size raw bytes.
//   The file ends with the last storage.
// Each tensor becomes one whole-tensor chunk. A row-major view is a plain byte range of the file
// (data_offset); any other stride layout is gathered into row-major order when read (the view's
// storage span must fit kPytorchMaxGatherBytes); a numpy array's bytes come from the pickle.
//
// TorchScript archives (torch.jit.save) are the zip format too, read as format "torchscript": data.pkl
// is the scripted module (its classes are `__torch__.*`, the archive's own TorchScript classes),
// constants.pkl its constants (tensors named "CONSTANTS.<i>", storages under <archive>/constants/),
// code/ the TorchScript source torch.jit.load compiles (deflated members; named in
// metadata()["torchscript_code"], never run or parsed here).
#pragma once

#include <memory>
#include <string>

#include "base/byte_source.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr uint64_t kPytorchMaxPickleBytes = 256ull << 20;
constexpr const char* kTorchScriptConstantsPrefix = "CONSTANTS.";
constexpr uint64_t kPytorchMaxGatherBytes = 1ull << 30;
// The legacy format's first pickle: PROTO 2, LONG1 of 10 bytes (the magic number), STOP.
constexpr uint8_t kPytorchLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                           0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};

Result<std::unique_ptr<TensorFile>> open_pytorch(std::unique_ptr<ByteSource> source);
Result<std::unique_ptr<TensorFile>> open_pytorch_legacy(std::unique_ptr<ByteSource> source);
Result<std::unique_ptr<TensorFile>> open_pytorch_file(const std::string& path);  // either format
// Whether `path` is a torch.jit.save archive (a zip whose archive holds code/ or constants.pkl); reads
// only the zip's directory. False for anything unreadable.
bool is_torchscript_file(const std::string& path);

}  // namespace ckpt
