#include "formats/hdf5_file.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/byte_source.h"
#include "base/json_fields.h"
#include "base/sha256.h"
#include "formats/mapped_tensor_file.h"

namespace ckpt {

namespace {

constexpr size_t kMaxRank = 32;
constexpr size_t kMaxStringAttribute = 64u << 20;

// HDF5 prints a stack trace to stderr on every failed call unless told not to; readers report
// failures as Status values instead.
void silence_hdf5_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

// Owns one hid_t and closes it with the right H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  Closer close_;
};

// The on-disk HDF5 type for a dtype (caller closes it).
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

Status h5_fail(const std::string& path, const std::string& what) {
  return Status::io_error(path + ": HDF5 " + what + " failed");
}

Status write_string_attr(hid_t obj, const char* name, const std::string& value, const std::string& path) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!type.valid() || H5Tset_size(type.get(), std::max<size_t>(1, value.size())) < 0)
    return h5_fail(path, "string type");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), padded.data()) < 0) {
    return h5_fail(path, std::string("write of attribute ") + name);
  }
  return Status::ok();
}

Status write_dims_attr(hid_t obj, const char* name, const std::vector<int64_t>& dims,
                       const std::string& path) {
  // A scalar tensor has no dims: a null dataspace, since HDF5 cannot write a zero-length array.
  const hsize_t n = dims.size();
  Handle space(dims.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle attr(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid() || (!dims.empty() && H5Awrite(attr.get(), H5T_NATIVE_INT64, dims.data()) < 0)) {
    return h5_fail(path, std::string("write of attribute ") + name);
  }
  return Status::ok();
}

Result<uint64_t> write_dataset(hid_t file, const ChunkPayload& c, const std::string& path) {
  const std::string group = "/" + hdf5_group_name(c.info.name);
  if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0) {
    Handle g(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!g.valid()) return h5_fail(path, "create of group " + group);
  }
  const std::string ds_name = group + "/" + chunk_dataset_name(c.info);
  std::vector<hsize_t> dims(c.info.shape.begin(), c.info.shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle type(file_type(c.info.dtype), H5Tclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  // Early allocation gives every dataset (even one never written) an address we can report.
  if (!space.valid() || !type.valid() || !dcpl.valid() || H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS) < 0 ||
      H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY) < 0) {
    return h5_fail(path, "dataset setup for " + c.info.label());
  }
  Handle ds(H5Dcreate2(file, ds_name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
            H5Dclose);
  if (!ds.valid()) return h5_fail(path, "create of dataset " + ds_name);
  // Memory type == file type: little-endian bytes go in unconverted, so the payload is bit-exact.
  if (c.info.data_bytes && H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, c.data) < 0) {
    return h5_fail(path, "write of dataset " + ds_name);
  }
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "name", c.info.name, path));
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "component", c.info.component, path));
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "dtype", dtype_name(c.info.dtype), path));
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "sha256", sha256_hex(c.data, c.info.data_bytes), path));
  CKPT_RETURN_IF_ERROR(write_dims_attr(ds.get(), "global_shape", c.info.global_shape, path));
  CKPT_RETURN_IF_ERROR(write_dims_attr(ds.get(), "offsets", c.info.offsets, path));
  if (c.info.data_bytes == 0) return uint64_t{0};
  const haddr_t addr = H5Dget_offset(ds.get());
  if (addr == HADDR_UNDEF) return h5_fail(path, "offset of dataset " + ds_name);
  return static_cast<uint64_t>(addr);
}

Status fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(path + ": cannot reopen for fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Status::io_error(path + ": fsync failed: " + std::strerror(err));
  return Status::ok();
}

// ---- reading ----------------------------------------------------------------------------------

Result<std::string> read_string_attr(hid_t obj, const char* name, const std::string& where) {
  if (H5Aexists(obj, name) <= 0) return Status::corruption(where + ": missing attribute '" + name + "'");
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle type(attr.valid() ? H5Aget_type(attr.get()) : -1, H5Tclose);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0) {
    return Status::corruption(where + ": attribute '" + name + "' is not a fixed-length string");
  }
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  const size_t size = H5Tget_size(type.get());
  if (!space.valid() || H5Sget_simple_extent_npoints(space.get()) != 1 || size == 0 ||
      size > kMaxStringAttribute) {
    return Status::corruption(where + ": attribute '" + name + "' has a bad size");
  }
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) {
    return Status::corruption(where + ": cannot read attribute '" + name + "'");
  }
  out.resize(std::strlen(out.c_str()));
  return out;
}

Result<std::vector<int64_t>> read_dims_attr(hid_t obj, const char* name, const std::string& where) {
  if (H5Aexists(obj, name) <= 0) return Status::corruption(where + ": missing attribute '" + name + "'");
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle type(attr.valid() ? H5Aget_type(attr.get()) : -1, H5Tclose);
  Handle space(attr.valid() ? H5Aget_space(attr.get()) : -1, H5Sclose);
  if (!type.valid() || !space.valid() || H5Tget_class(type.get()) != H5T_INTEGER) {
    return Status::corruption(where + ": attribute '" + name + "' is not an integer array");
  }
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || static_cast<size_t>(n) > kMaxRank) {
    return Status::corruption(where + ": attribute '" + name + "' has " + std::to_string(n) +
                              " values, limit " + std::to_string(kMaxRank));
  }
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()) < 0) {
    return Status::corruption(where + ": cannot read attribute '" + name + "'");
  }
  return out;
}

// The dataset's HDF5 type must be the one we write for its dtype attribute.
bool type_matches(hid_t type, DType dtype) {
  Handle expected(file_type(dtype), H5Tclose);
  return expected.valid() && H5Tequal(type, expected.get()) > 0;
}

struct VisitState {
  std::vector<std::string> datasets;
  bool too_many = false;
};

herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* data) {
  auto* state = static_cast<VisitState*>(data);
  if (info->type != H5O_TYPE_DATASET) return 0;
  if (state->datasets.size() >= kHdf5MaxDatasets) {
    state->too_many = true;
    return 1;  // stop
  }
  state->datasets.emplace_back(name);
  return 0;
}

Result<ChunkInfo> read_dataset(hid_t file, const std::string& ds_name, uint64_t file_size,
                               const std::string& path) {
  const std::string where = path + ": dataset '/" + ds_name + "'";
  Handle ds(H5Dopen2(file, ds_name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return Status::corruption(where + ": cannot open");
  ChunkInfo c;
  CKPT_ASSIGN_OR_RETURN(c.name, read_string_attr(ds.get(), "name", where));
  CKPT_ASSIGN_OR_RETURN(c.component, read_string_attr(ds.get(), "component", where));
  CKPT_ASSIGN_OR_RETURN(std::string dtype, read_string_attr(ds.get(), "dtype", where));
  CKPT_ASSIGN_OR_RETURN(c.sha256, read_string_attr(ds.get(), "sha256", where));
  CKPT_ASSIGN_OR_RETURN(c.global_shape, read_dims_attr(ds.get(), "global_shape", where));
  CKPT_ASSIGN_OR_RETURN(c.offsets, read_dims_attr(ds.get(), "offsets", where));
  const auto dt = dtype_from_name(dtype);
  if (!dt) return Status::not_supported(where + ": unknown dtype '" + dtype + "'");
  c.dtype = *dt;
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.valid() || !type_matches(type.get(), c.dtype)) {
    return Status::corruption(where + ": HDF5 type does not match dtype attribute " + dtype);
  }
  Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0) {
    return Status::not_supported(where + ": not a contiguous, unfiltered dataset");
  }
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0 || static_cast<size_t>(rank) > kMaxRank) return Status::corruption(where + ": bad dataspace");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return Status::corruption(where + ": bad dataspace");
  }
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(INT64_MAX)) return Status::corruption(where + ": dimension too large");
    c.shape.push_back(static_cast<int64_t>(d));
  }
  const auto nbytes = checked_nbytes(c.shape, c.dtype);
  if (!nbytes) return Status::corruption(where + ": shape " + shape_to_string(c.shape) + " overflows");
  c.data_bytes = *nbytes;
  const hsize_t stored = H5Dget_storage_size(ds.get());
  if (stored != *nbytes) {
    return Status::corruption(where + ": expected " + std::to_string(*nbytes) + " bytes for " + dtype + " " +
                              shape_to_string(c.shape) + ", storage has " + std::to_string(stored));
  }
  if (*nbytes > 0) {
    const haddr_t addr = H5Dget_offset(ds.get());
    if (addr == HADDR_UNDEF || !range_within(addr, *nbytes, file_size)) {
      return Status::corruption(where + ": payload of " + std::to_string(*nbytes) + " bytes at offset " +
                                (addr == HADDR_UNDEF ? std::string("(undefined)") : std::to_string(addr)) +
                                " is outside the file (" + std::to_string(file_size) + " bytes)");
    }
    c.data_offset = addr;
  }
  CKPT_RETURN_IF_ERROR(check_chunk_geometry(c, where));
  return c;
}

Status write_hdf5_contents(const std::string& path, const std::vector<ChunkPayload>& chunks,
                           const nlohmann::json& metadata, WrittenFile* out, bool* created) {
  // H5F_ACC_EXCL: like DurableFile::create_exclusive, an existing file is never overwritten.
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return Status::io_error(path + ": cannot create HDF5 file (exists, or no permission)");
  *created = true;
  CKPT_RETURN_IF_ERROR(write_string_attr(file.get(), kHdf5MetadataAttribute, metadata.dump(), path));
  for (const auto& c : chunks) {
    CKPT_ASSIGN_OR_RETURN(uint64_t offset, write_dataset(file.get(), c, path));
    ChunkInfo info = c.info;
    info.data_offset = offset;
    info.sha256 = sha256_hex(c.data, c.info.data_bytes);
    out->chunks.push_back(std::move(info));
  }
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) return h5_fail(path, "flush");
  return Status::ok();
}

}  // namespace

std::string hdf5_group_name(const std::string& tensor_name) {
  if (tensor_name == "." || tensor_name == "..") {
    std::string s;
    for (size_t i = 0; i < tensor_name.size(); ++i) s += "%2E";
    return s;
  }
  std::string s;
  for (char ch : tensor_name) {
    if (ch == '%')
      s += "%25";
    else if (ch == '/')
      s += "%2F";
    else
      s += ch;
  }
  return s;
}

Result<WrittenFile> write_hdf5_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                    const nlohmann::json& metadata) {
  silence_hdf5_errors();
  CKPT_RETURN_IF_ERROR(check_chunk_payloads(chunks));
  WrittenFile out;
  out.path = path;
  bool created = false;
  Status s = write_hdf5_contents(path, chunks, metadata, &out, &created);
  if (!s.is_ok()) {
    if (created) ::unlink(path.c_str());  // a half-written shard must not look like a shard
    return s;
  }
  CKPT_RETURN_IF_ERROR(fsync_path(path));
  CKPT_ASSIGN_OR_RETURN(out.sha256, sha256_hex_of_file(path, &out.bytes));
  return out;
}
Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path) {
  silence_hdf5_errors();
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  const uint64_t size = source->size();
  std::vector<ChunkInfo> chunks;
  nlohmann::json metadata = nlohmann::json::object();
  {
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid())
      return Status::corruption(path + ": HDF5 cannot open the file (bad superblock or truncated)");
    if (H5Aexists(file.get(), kHdf5MetadataAttribute) > 0) {
      CKPT_ASSIGN_OR_RETURN(std::string text, read_string_attr(file.get(), kHdf5MetadataAttribute, path));
      CKPT_ASSIGN_OR_RETURN(metadata, parse_json(text, path + ": " + kHdf5MetadataAttribute));
    }
    VisitState state;
    if (H5Ovisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &state) < 0) {
      return Status::corruption(path + ": HDF5 cannot walk the group tree");
    }
    if (state.too_many) {
      return Status::corruption(path + ": more than " + std::to_string(kHdf5MaxDatasets) + " datasets");
    }
    for (const auto& name : state.datasets) {
      CKPT_ASSIGN_OR_RETURN(ChunkInfo c, read_dataset(file.get(), name, size, path));
      chunks.push_back(std::move(c));
    }
  }
  return std::unique_ptr<TensorFile>(
      new MappedTensorFile("hdf5", std::move(source), std::move(chunks), std::move(metadata)));
}

}  // namespace ckpt
