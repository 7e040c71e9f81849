// numpy's `.npy` (numpy.save; numpy/lib/format.py), read without numpy:
//   "\x93NUMPY", major, minor, header length (u16 LE in 1.0; u32 LE in 2.0 and 3.0), then a Python
//   dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with blanks to
//   a 64-byte boundary and ended by '\n', then the array's bytes.
// An object array ('descr': '|O') stores a pickle of the array instead, which
// numpy.load(allow_pickle=True) runs: its globals are the file's (the gate judges them) and it has no
// tensor. numpy parses the header with ast.literal_eval; only the exact form numpy.save writes is
// read here, anything else is refused as ambiguous (formats/torch_load_dispatch.h's rule: where
// two readings could differ, refuse). One array is one tensor, named "array".
#pragma once

#include <memory>

#include "base/byte_source.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr uint8_t kNumpyMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

Result<std::unique_ptr<TensorFile>> open_numpy(std::unique_ptr<ByteSource> source);

}  // namespace ckpt
