#include "formats/hdf5_library.h"

namespace ckpt::hdf5 {

std::mutex& library_mutex() {
  static std::mutex m;
  return m;
}

void silence_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return H5Tcopy(H5T_IEEE_F32LE);
    case DType::kF64: return H5Tcopy(H5T_IEEE_F64LE);
    case DType::kF16: {
      // IEEE binary16, defined the way h5py defines numpy.float16.
      hid_t t = H5Tcopy(H5T_IEEE_F32LE);
      H5Tset_fields(t, 15, 10, 5, 0, 10);
      H5Tset_size(t, 2);
      H5Tset_ebias(t, 15);
      return t;
    }
    case DType::kBF16: return H5Tcopy(H5T_STD_U16LE);
    case DType::kI64: return H5Tcopy(H5T_STD_I64LE);
    case DType::kI32: return H5Tcopy(H5T_STD_I32LE);
    case DType::kI16: return H5Tcopy(H5T_STD_I16LE);
    case DType::kI8: return H5Tcopy(H5T_STD_I8LE);
    case DType::kU8:
    case DType::kBool: return H5Tcopy(H5T_STD_U8LE);
    case DType::kU16: return H5Tcopy(H5T_STD_U16LE);
    case DType::kU32: return H5Tcopy(H5T_STD_U32LE);
    case DType::kU64: return H5Tcopy(H5T_STD_U64LE);
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF8E4M3Fnuz:
    case DType::kF8E5M2Fnuz:
    case DType::kF8E8M0:
    case DType::kC32:
    case DType::kC64:
    case DType::kC128:
    case DType::kF4E2M1X2:
      return -1;  // no HDF5 type here (h5py's complex is a compound); the writer refuses them
  }
  return -1;
}

std::string chunk_dataset_name(const ChunkInfo& c) {
  if (c.label() == c.name) return "all";
  std::string s;
  for (size_t d = 0; d < c.shape.size(); ++d) {
    if (d) s += ",";
    s += std::to_string(c.offsets[d]) + ":" + std::to_string(c.offsets[d] + c.shape[d]);
  }
  return s;
}

Status library_failure(const std::string& path, const std::string& what) {
  return Status::io_error(path + ": HDF5 " + what + " failed");
}

}  // namespace ckpt::hdf5
