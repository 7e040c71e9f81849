#include "formats/hdf5_file.h"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "base/byte_coding.h"
#include "base/byte_source.h"
#include "base/isolated_call.h"
#include "base/json_fields.h"
#include "formats/hdf5_library.h"
#include "formats/keras_config.h"
#include "formats/mapped_tensor_file.h"

namespace ckpt {

namespace {

using hdf5::Handle;

constexpr size_t kMaxHdf5Rank = 32;
constexpr size_t kMaxStringAttribute = 64u << 20;

// ---- reading ----------------------------------------------------------------------------------

// The root attributes in which Keras keeps a model's architecture (formats/keras_config.h).
constexpr const char* kKerasConfigAttributes[] = {"model_config", "training_config"};

Result<std::string> read_string_attr(hid_t obj, const char* name, const std::string& where);

// A scalar string attribute of either kind (h5py 3 writes bytes and str as variable-length strings,
// h5py 2 wrote bytes as fixed-length ones); `present` false when absent or not one string.
Result<std::string> read_text_attr(hid_t obj, const char* name, const std::string& where, bool* present) {
  *present = false;
  if (H5Aexists(obj, name) <= 0) return std::string();
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle type(attr.valid() ? H5Aget_type(attr.get()) : -1, H5Tclose);
  Handle space(attr.valid() ? H5Aget_space(attr.get()) : -1, H5Sclose);
  if (!type.valid() || !space.valid() || H5Tget_class(type.get()) != H5T_STRING ||
      H5Sget_simple_extent_npoints(space.get()) != 1)
    return std::string();
  if (H5Tis_variable_str(type.get()) <= 0) {
    *present = true;
    return read_string_attr(obj, name, where);
  }
  Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!memory.valid() || H5Tset_size(memory.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(memory.get(), H5Tget_cset(type.get())) < 0)
    return Status::corruption(where + ": cannot read attribute '" + name + "'");
  char* text = nullptr;
  if (H5Aread(attr.get(), memory.get(), &text) < 0)
    return Status::corruption(where + ": cannot read attribute '" + name + "'");
  std::string out = text ? std::string(text, strnlen(text, kMaxStringAttribute)) : std::string();
  H5free_memory(text);
  *present = true;
  return out;
}

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
  if (n < 0 || static_cast<size_t>(n) > kMaxHdf5Rank) {
    return Status::corruption(where + ": attribute '" + name + "' has " + std::to_string(n) +
                              " values, limit " + std::to_string(kMaxHdf5Rank));
  }
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()) < 0) {
    return Status::corruption(where + ": cannot read attribute '" + name + "'");
  }
  return out;
}

// The dataset's HDF5 type must be the one we write for its dtype attribute.
bool type_matches(hid_t type, DType dtype) {
  Handle expected(hdf5::file_type(dtype), H5Tclose);
  return expected.valid() && H5Tequal(type, expected.get()) > 0;
}

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64,
                                DType::kI32, DType::kI16, DType::kI8,   DType::kU8,  DType::kBool};
// What a dataset of a file we did not write may be read as: the HDF5 type must equal the
// little-endian IEEE float or integer type of the same size (BF16 and BOOL have no HDF5 type of
// their own, so they are never inferred).
constexpr DType kGenericDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kI64,
                                    DType::kI32, DType::kI16, DType::kI8,  DType::kU8,
                                    DType::kU16, DType::kU32, DType::kU64};

uint32_t dtype_bit(DType dtype) {
  return uint32_t{1} << static_cast<unsigned>(dtype);
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

// ---- the parser child's report ----------------------------------------------------------------
// Little-endian, the child's only way to speak to the parent:
//   report   = u8 'E' error | u8 'F' facts
//   error    = u8 status code, str message
//   facts    = u8 has_metadata, [str metadata text], per Keras config attribute u8 present [str],
//              u64 dataset count, dataset...
//   dataset  = u8 'O' ours | u8 'G' generic
//   ours     = str path, str name, str component, str dtype, str sha256, dims global_shape,
//              dims offsets, u32 type_mask (bit d: the HDF5 type is the one we write for DType d),
//              i32 layout (H5D_layout_t, -1 unknown), i32 filter count, i32 rank (-1: unreadable),
//              rank x u64 dims, u64 storage size, u8 has_offset, u64 offset
//   generic  = str path, u32 type_mask (over kGenericDTypes' DTypes), str type description,
//              i32 layout, i32 filter count, str filter names, i32 rank, rank x u64 dims,
//              u64 storage size, u8 has_offset, u64 offset, u8 chunk state (0 none, 1 listed,
//              2 too many), [listed: i32 chunk rank, chunk rank x u64 chunk dims, u64 count,
//              count x (chunk rank x u64 offsets, u64 address, u64 size)]
// A dataset is ours when the file has the ckptcheck_metadata attribute or the dataset has our
// `dtype` and `component` attributes; any other dataset (Keras weights, ...) is generic.
//   str      = u64 length, bytes;  dims = u64 count, count x i64
// The parent trusts none of it: every count and length is bounded before use, and a report that
// does not parse exactly is corruption.

constexpr uint8_t kReportError = 'E';
constexpr uint8_t kReportFacts = 'F';
constexpr uint8_t kDatasetOurs = 'O';
constexpr uint8_t kDatasetGeneric = 'G';
constexpr uint8_t kChunksNone = 0;
constexpr uint8_t kChunksListed = 1;
constexpr uint8_t kChunksTooMany = 2;
constexpr size_t kMaxDatasetPathBytes = 64 << 10;
constexpr uint64_t kTestFaultOffsetShift = uint64_t{1} << 40;

class ReportWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { fixed(v, 4); }
  void i32(int32_t v) { fixed(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { fixed(v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    out_ += s;
  }
  void dims(const std::vector<int64_t>& d) {
    u64(d.size());
    for (int64_t v : d) u64(static_cast<uint64_t>(v));
  }
  std::string take() { return std::move(out_); }

 private:
  void fixed(uint64_t v, size_t n) {
    uint8_t b[8];
    encode_le(b, v, n);
    out_.append(reinterpret_cast<const char*>(b), n);
  }
  std::string out_;
};

// Reads the report; the first failure sticks, and every later read returns zeros.
class ReportReader {
 public:
  explicit ReportReader(const std::string& in) : in_(in) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool at_end() const { return at_ == in_.size(); }
  uint8_t u8() { return static_cast<uint8_t>(fixed(1, "u8")); }
  uint32_t u32() { return static_cast<uint32_t>(fixed(4, "u32")); }
  int32_t i32() { return static_cast<int32_t>(static_cast<uint32_t>(fixed(4, "i32"))); }
  uint64_t u64() { return fixed(8, "u64"); }
  std::string str(size_t max_bytes, const char* what) {
    const uint64_t n = u64();
    if (!ok()) return {};
    if (n > max_bytes || n > in_.size() - at_) {
      fail(std::string(what) + " of " + std::to_string(n) + " bytes (limit " + std::to_string(max_bytes) +
           ", " + std::to_string(in_.size() - at_) + " left)");
      return {};
    }
    std::string s = in_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return s;
  }
  std::vector<int64_t> dims(const char* what) {
    const uint64_t n = u64();
    if (ok() && n > kMaxHdf5Rank) fail(std::string(what) + " with " + std::to_string(n) + " values");
    std::vector<int64_t> d;
    for (uint64_t i = 0; ok() && i < n; ++i) d.push_back(static_cast<int64_t>(u64()));
    return d;
  }
  void fail(const std::string& why) {
    if (ok()) error_ = why + " at byte " + std::to_string(at_);
  }

 private:
  uint64_t fixed(size_t n, const char* what) {
    if (!ok()) return 0;
    if (in_.size() - at_ < n) {
      fail(std::string("truncated ") + what);
      return 0;
    }
    const uint64_t v = decode_le(reinterpret_cast<const uint8_t*>(in_.data()) + at_, n);
    at_ += n;
    return v;
  }
  const std::string& in_;
  size_t at_ = 0;
  std::string error_;
};

// The parent's side of what describe_dataset() found: rank (-1: unreadable), dims, stored bytes and
// the contiguous address, as the child wrote them; a rank beyond kMaxHdf5Rank fails the reader.
struct ReportedExtent {
  int32_t rank = -1;
  std::vector<uint64_t> dims;
  uint64_t storage = 0;
  bool has_offset = false;
  uint64_t addr = 0;
};

ReportedExtent read_extent(ReportReader& r) {
  ReportedExtent e;
  e.rank = r.i32();
  if (r.ok() && (e.rank < -1 || e.rank > static_cast<int32_t>(kMaxHdf5Rank)))
    r.fail("rank " + std::to_string(e.rank));
  for (int32_t d = 0; r.ok() && d < e.rank; ++d) e.dims.push_back(r.u64());
  e.storage = r.u64();
  e.has_offset = r.u8() != 0;
  e.addr = r.u64();
  return e;
}

// In the child: everything libhdf5 says about one dataset, unjudged (the parent judges).
// What both dataset reports start from: which of `candidates` its HDF5 type matches (a bit per
// DType), its layout and filter count from the creation property list, its rank and dimensions
// (rank -1 and none when unreadable or above kMaxHdf5Rank), stored bytes and, when contiguous, its file
// address. The handles stay open for the caller's further questions (filters, chunks).
struct DatasetLayout {
  uint32_t type_mask = 0;
  Handle type;
  Handle dcpl;
  Handle space;
  int32_t layout = -1;
  int32_t filters = -1;
  int32_t rank = -1;
  std::vector<hsize_t> dims;
  uint64_t storage = 0;
  haddr_t addr = HADDR_UNDEF;
};

template <size_t N>
DatasetLayout describe_dataset(hid_t ds, const DType (&candidates)[N]) {
  DatasetLayout d{0,
                  Handle(H5Dget_type(ds), H5Tclose),
                  Handle(H5Dget_create_plist(ds), H5Pclose),
                  Handle(H5Dget_space(ds), H5Sclose),
                  -1,
                  -1,
                  -1,
                  {},
                  0,
                  HADDR_UNDEF};
  if (d.type.valid()) {
    for (DType t : candidates) {
      if (type_matches(d.type.get(), t)) d.type_mask |= dtype_bit(t);
    }
  }
  d.layout = d.dcpl.valid() ? static_cast<int32_t>(H5Pget_layout(d.dcpl.get())) : -1;
  d.filters = d.dcpl.valid() ? static_cast<int32_t>(H5Pget_nfilters(d.dcpl.get())) : -1;
  const int32_t rank = d.space.valid() ? H5Sget_simple_extent_ndims(d.space.get()) : -1;
  if (rank >= 0 && static_cast<size_t>(rank) <= kMaxHdf5Rank) {
    d.dims.resize(static_cast<size_t>(rank));
    if (rank == 0 || H5Sget_simple_extent_dims(d.space.get(), d.dims.data(), nullptr) >= 0) {
      d.rank = rank;
    } else {
      d.dims.clear();
    }
  }
  d.storage = H5Dget_storage_size(ds);
  d.addr = d.layout == H5D_CONTIGUOUS ? H5Dget_offset(ds) : HADDR_UNDEF;
  return d;
}

// The child's half of read_extent(): rank, dims, stored bytes and the contiguous address (moved by
// `shift` in the fault-injection tests that prove the parent re-checks it).
void write_extent(const DatasetLayout& info, uint64_t shift, ReportWriter* w) {
  w->i32(info.rank);
  for (hsize_t d : info.dims) w->u64(d);
  w->u64(info.storage);
  w->u8(info.addr != HADDR_UNDEF);
  w->u64(info.addr == HADDR_UNDEF ? 0 : info.addr + shift);
}

Status report_dataset(hid_t file, const std::string& ds_name, const std::string& path, bool shift_offsets,
                      ReportWriter* w) {
  const std::string where = path + ": dataset '/" + ds_name + "'";
  Handle ds(H5Dopen2(file, ds_name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return Status::corruption(where + ": cannot open");
  CKPT_ASSIGN_OR_RETURN(std::string name, read_string_attr(ds.get(), "name", where));
  CKPT_ASSIGN_OR_RETURN(std::string component, read_string_attr(ds.get(), "component", where));
  CKPT_ASSIGN_OR_RETURN(std::string dtype, read_string_attr(ds.get(), "dtype", where));
  CKPT_ASSIGN_OR_RETURN(std::string sha256, read_string_attr(ds.get(), "sha256", where));
  CKPT_ASSIGN_OR_RETURN(std::vector<int64_t> global_shape, read_dims_attr(ds.get(), "global_shape", where));
  CKPT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, read_dims_attr(ds.get(), "offsets", where));
  const DatasetLayout info = describe_dataset(ds.get(), kAllDTypes);
  const uint32_t type_mask = info.type_mask;
  const int32_t layout = info.layout, filters = info.filters;
  w->str(ds_name);
  w->str(name);
  w->str(component);
  w->str(dtype);
  w->str(sha256);
  w->dims(global_shape);
  w->dims(offsets);
  w->u32(type_mask);
  w->i32(layout);
  w->i32(filters);
  write_extent(info, shift_offsets ? kTestFaultOffsetShift : 0, w);
  return Status::ok();
}

std::string describe_type(hid_t type) {
  if (type < 0) return "unreadable type";
  const size_t size = H5Tget_size(type);
  std::string cls;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: cls = H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned integer" : "integer"; break;
    case H5T_FLOAT: cls = "float"; break;
    case H5T_STRING: return H5Tis_variable_str(type) > 0 ? "variable-length string" : "string";
    case H5T_COMPOUND: cls = "compound"; break;
    case H5T_ENUM: cls = "enum"; break;
    case H5T_ARRAY: cls = "array"; break;
    case H5T_VLEN: return "variable-length sequence";
    case H5T_REFERENCE: return "reference";
    case H5T_OPAQUE: cls = "opaque"; break;
    case H5T_BITFIELD: cls = "bitfield"; break;
    case H5T_TIME: cls = "time"; break;
    default: cls = "unknown class"; break;
  }
  std::string s = std::to_string(size) + "-byte " + cls;
  const H5T_class_t c = H5Tget_class(type);
  if (c == H5T_INTEGER || c == H5T_FLOAT) {
    const H5T_order_t order = H5Tget_order(type);
    s += order == H5T_ORDER_BE ? ", big-endian" : order == H5T_ORDER_LE ? "" : ", unusual byte order";
  }
  return s;
}

// In the child: a dataset of a file we did not write, described for the parent to judge.
Status report_generic_dataset(hid_t file, const std::string& ds_name, const std::string& path,
                              bool shift_offsets, uint64_t* chunks_left, ReportWriter* w) {
  const uint64_t shift = shift_offsets ? kTestFaultOffsetShift : 0;
  const std::string where = path + ": dataset '/" + ds_name + "'";
  Handle ds(H5Dopen2(file, ds_name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return Status::corruption(where + ": cannot open");
  const DatasetLayout info = describe_dataset(ds.get(), kGenericDTypes);
  const uint32_t type_mask = info.type_mask;
  const Handle& type = info.type;
  const Handle& dcpl = info.dcpl;
  const Handle& space = info.space;
  const int32_t layout = info.layout, filters = info.filters;
  std::string filter_names;
  for (int32_t i = 0; i < filters && i < 16; ++i) {
    char name[64] = {0};
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr,
                                           sizeof(name), name, &config);
    name[sizeof(name) - 1] = '\0';
    filter_names += (filter_names.empty() ? "" : ", ") +
                    (id == H5Z_FILTER_DEFLATE       ? std::string("gzip")
                     : id == H5Z_FILTER_SHUFFLE     ? std::string("shuffle")
                     : id == H5Z_FILTER_FLETCHER32  ? std::string("fletcher32")
                     : id == H5Z_FILTER_SZIP        ? std::string("szip")
                     : id == H5Z_FILTER_NBIT        ? std::string("nbit")
                     : id == H5Z_FILTER_SCALEOFFSET ? std::string("scaleoffset")
                                                    : "filter " + std::to_string(id));
  }
  const int32_t rank = info.rank;
  w->str(ds_name);
  w->u32(type_mask);
  w->str(describe_type(type.get()));
  w->i32(layout);
  w->i32(filters);
  w->str(filter_names);
  write_extent(info, shift, w);
  // Chunk addresses only for what the parent can read: chunked, unfiltered, a known type.
  hsize_t nchunks = 0;
  if (layout != H5D_CHUNKED || filters != 0 || type_mask == 0 || rank <= 0 ||
      H5Dget_num_chunks(ds.get(), space.get(), &nchunks) < 0) {
    w->u8(kChunksNone);
    return Status::ok();
  }
  if (nchunks > *chunks_left) {
    w->u8(kChunksTooMany);
    return Status::ok();
  }
  *chunks_left -= nchunks;
  std::vector<hsize_t> chunk_dims(static_cast<size_t>(rank));
  const int chunk_rank = H5Pget_chunk(dcpl.get(), rank, chunk_dims.data());
  if (chunk_rank != rank) {
    w->u8(kChunksNone);
    return Status::ok();
  }
  w->u8(kChunksListed);
  w->i32(chunk_rank);
  for (hsize_t d : chunk_dims) w->u64(d);
  w->u64(nchunks);
  std::vector<hsize_t> offsets(static_cast<size_t>(rank));
  for (hsize_t i = 0; i < nchunks; ++i) {
    unsigned filter_mask = 0;
    haddr_t chunk_addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info(ds.get(), space.get(), i, offsets.data(), &filter_mask, &chunk_addr, &size) < 0)
      return Status::corruption(where + ": cannot read the address of chunk " + std::to_string(i));
    for (hsize_t o : offsets) w->u64(o);
    w->u64(chunk_addr == HADDR_UNDEF ? UINT64_MAX : chunk_addr + shift);
    w->u64(size);
  }
  return Status::ok();
}

Status report_file(const std::string& open_path, const std::string& path, bool shift_offsets,
                   ReportWriter* w) {
  Handle file(H5Fopen(open_path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid())
    return Status::corruption(path + ": HDF5 cannot open the file (bad superblock or truncated)");
  w->u8(kReportFacts);
  // Our writer never writes a Keras config: a file carrying both is read as what Keras would load
  // (a generic HDF5 file whose configs are checked), never trusted as one of our shards.
  const bool keras =
      H5Aexists(file.get(), "model_config") > 0 || H5Aexists(file.get(), "training_config") > 0;
  const bool ours = H5Aexists(file.get(), kHdf5MetadataAttribute) > 0 && !keras;
  if (ours) {
    CKPT_ASSIGN_OR_RETURN(std::string text, read_string_attr(file.get(), kHdf5MetadataAttribute, path));
    w->u8(1);
    w->str(text);
  } else {
    w->u8(0);
  }
  // Any file may be a Keras model, ours in name or not: keras.models.load_model reads these configs
  // whatever other attribute sits beside them, so they go to the parent, which looks for code in them
  // (formats/keras_config.h) without libhdf5. Skipping them when our attribute was present let a
  // Lambda layer through.
  for (const char* name : kKerasConfigAttributes) {
    bool present = false;
    CKPT_ASSIGN_OR_RETURN(std::string text, read_text_attr(file.get(), name, path, &present));
    w->u8(present ? 1 : 0);
    if (present) w->str(text);
  }
  VisitState state;
  if (H5Ovisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &state) < 0) {
    return Status::corruption(path + ": HDF5 cannot walk the group tree");
  }
  if (state.too_many) {
    return Status::corruption(path + ": more than " + std::to_string(kHdf5MaxDatasets) + " datasets");
  }
  w->u64(state.datasets.size());
  uint64_t chunks_left = kHdf5MaxChunks;
  for (const auto& name : state.datasets) {
    if (name.size() > kMaxDatasetPathBytes) {
      return Status::corruption(path + ": a dataset path of " + std::to_string(name.size()) +
                                " bytes (limit " + std::to_string(kMaxDatasetPathBytes) + ")");
    }
    bool dataset_is_ours = ours;
    if (!dataset_is_ours) {
      Handle ds(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
      dataset_is_ours =
          ds.valid() && H5Aexists(ds.get(), "dtype") > 0 && H5Aexists(ds.get(), "component") > 0;
    }
    w->u8(dataset_is_ours ? kDatasetOurs : kDatasetGeneric);
    if (dataset_is_ours) {
      CKPT_RETURN_IF_ERROR(report_dataset(file.get(), name, path, shift_offsets, w));
    } else {
      CKPT_RETURN_IF_ERROR(report_generic_dataset(file.get(), name, path, shift_offsets, &chunks_left, w));
    }
  }
  return Status::ok();
}

// The parser child's whole life: a report, or the first error as a report.
std::string parse_in_child(const std::string& open_path, const std::string& path) {
  const char* fault = std::getenv("CKPTCHECK_TEST_HDF5_CHILD_FAULT");
  const std::string test_fault = fault ? fault : "";
  if (test_fault == "segv") {
    volatile uintptr_t wild = 16;  // not provably null, so the compiler emits a real store
    *reinterpret_cast<volatile int*>(wild) = 1;
  }
  if (test_fault == "hang") {
    for (;;) ::pause();
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  ReportWriter facts;
  const Status s = report_file(open_path, path, test_fault == "bad-offset", &facts);
  if (s.is_ok()) return facts.take();
  ReportWriter error;
  error.u8(kReportError);
  error.u8(static_cast<uint8_t>(s.code()));
  error.str(s.message());
  return error.take();
}

// ---- the parent's side: judge the report ------------------------------------------------------

Result<ChunkInfo> chunk_from_report(ReportReader& r, uint64_t file_size, const std::string& path) {
  const std::string ds_name = r.str(kMaxDatasetPathBytes, "dataset path");
  ChunkInfo c;
  c.name = r.str(kMaxStringAttribute, "name");
  c.component = r.str(kMaxStringAttribute, "component");
  const std::string dtype = r.str(kMaxStringAttribute, "dtype");
  c.sha256 = r.str(kMaxStringAttribute, "sha256");
  c.global_shape = r.dims("global_shape");
  c.offsets = r.dims("offsets");
  const uint32_t type_mask = r.u32();
  const int32_t layout = r.i32();
  const int32_t filters = r.i32();
  const ReportedExtent extent = read_extent(r);
  const int32_t rank = extent.rank;
  const std::vector<uint64_t>& dims = extent.dims;
  const uint64_t storage = extent.storage;
  const bool has_offset = extent.has_offset;
  const uint64_t addr = extent.addr;
  if (!r.ok()) return Status::corruption(path + ": hdf5 parser child sent a malformed report: " + r.error());

  const std::string where = path + ": dataset '/" + ds_name + "'";
  const auto dt = dtype_from_name(dtype);
  if (!dt) return Status::not_supported(where + ": unknown dtype '" + dtype + "'");
  c.dtype = *dt;
  if ((type_mask & dtype_bit(c.dtype)) == 0) {
    return Status::corruption(where + ": HDF5 type does not match dtype attribute " + dtype);
  }
  if (layout != H5D_CONTIGUOUS || filters != 0) {
    return Status::not_supported(where + ": not a contiguous, unfiltered dataset (" +
                                 (layout == H5D_CHUNKED   ? std::string("chunked")
                                  : layout == H5D_COMPACT ? std::string("compact")
                                                          : "layout " + std::to_string(layout)) +
                                 ", " + std::to_string(filters) +
                                 " filters); ckptcheck reads only datasets stored as one byte range");
  }
  if (rank < 0) return Status::corruption(where + ": bad dataspace");
  for (uint64_t d : dims) {
    if (d > static_cast<uint64_t>(INT64_MAX)) return Status::corruption(where + ": dimension too large");
    c.shape.push_back(static_cast<int64_t>(d));
  }
  const auto nbytes = checked_nbytes(c.shape, c.dtype);
  if (!nbytes) return Status::corruption(where + ": shape " + shape_to_string(c.shape) + " overflows");
  c.data_bytes = *nbytes;
  if (storage != *nbytes) {
    return Status::corruption(where + ": expected " + std::to_string(*nbytes) + " bytes for " + dtype + " " +
                              shape_to_string(c.shape) + ", storage has " + std::to_string(storage));
  }
  if (*nbytes > 0) {
    if (!has_offset || !range_within(addr, *nbytes, file_size)) {
      return Status::corruption(where + ": payload of " + std::to_string(*nbytes) + " bytes at offset " +
                                (has_offset ? std::to_string(addr) : std::string("(undefined)")) +
                                " is outside the file (" + std::to_string(file_size) + " bytes)");
    }
    c.data_offset = addr;
  }
  CKPT_RETURN_IF_ERROR(check_chunk_geometry(c, where));
  return c;
}

struct ParsedHdf5 {
  std::vector<ChunkInfo> chunks;
  nlohmann::json metadata = nlohmann::json::object();
  size_t generic_datasets = 0;
  nlohmann::json unsupported = nlohmann::json::array();  // {path, type, shape, reason}
};

// What the child reported about one generic dataset (report_generic_dataset's fields, in order).
struct GenericReport {
  std::string ds_name;
  uint32_t type_mask = 0;
  std::string type_desc;
  int32_t layout = -1;
  int32_t filters = -1;
  std::string filter_names;
  ReportedExtent extent;
  uint8_t chunk_state = kChunksNone;
  std::vector<uint64_t> chunk_dims;
  struct StoredChunk {
    std::vector<int64_t> offsets;
    uint64_t addr, size;
  };
  std::vector<StoredChunk> stored;
};

// Phase 1: read the fields, bounding every count; a malformed report is corruption.
Result<GenericReport> read_generic_report(ReportReader& r, const std::string& path) {
  GenericReport g;
  g.ds_name = r.str(kMaxDatasetPathBytes, "dataset path");
  g.type_mask = r.u32();
  g.type_desc = r.str(256, "type description");
  g.layout = r.i32();
  g.filters = r.i32();
  g.filter_names = r.str(4096, "filter names");
  g.extent = read_extent(r);
  g.chunk_state = r.u8();
  if (r.ok() && g.chunk_state > kChunksTooMany) r.fail("chunk state " + std::to_string(g.chunk_state));
  if (r.ok() && g.chunk_state == kChunksListed) {
    const int32_t chunk_rank = r.i32();
    if (r.ok() && chunk_rank != g.extent.rank) r.fail("chunk rank " + std::to_string(chunk_rank));
    for (int32_t d = 0; r.ok() && d < chunk_rank; ++d) g.chunk_dims.push_back(r.u64());
    const uint64_t count = r.u64();
    if (r.ok() && count > kHdf5MaxChunks) r.fail(std::to_string(count) + " chunks");
    for (uint64_t i = 0; r.ok() && i < count; ++i) {
      GenericReport::StoredChunk c;
      for (int32_t d = 0; r.ok() && d < g.extent.rank; ++d)
        c.offsets.push_back(static_cast<int64_t>(r.u64()));
      c.addr = r.u64();
      c.size = r.u64();
      g.stored.push_back(std::move(c));
    }
  }
  if (!r.ok()) return Status::corruption(path + ": hdf5 parser child sent a malformed report: " + r.error());
  return g;
}

// One generic dataset being judged: what is known of it so far, and how to list it as unsupported.
struct GenericJudgment {
  const GenericReport& g;
  uint64_t file_size;
  std::string where;  // "<file>: dataset '/<path>'"
  std::optional<DType> dtype;
  std::vector<int64_t> shape;
  ParsedHdf5* out;

  Status unsupported(const std::string& reason) const {
    out->unsupported.push_back({{"path", "/" + g.ds_name},
                                {"type", dtype ? std::string(dtype_name(*dtype)) : g.type_desc},
                                {"shape", shape},
                                {"reason", reason}});
    return Status::ok();
  }
};

// Phase 2a: a contiguous dataset is one chunk, its payload one byte range of the file.
Status judge_contiguous(const GenericJudgment& j, ChunkInfo base, uint64_t nbytes) {
  const ReportedExtent& e = j.g.extent;
  base.shape = j.shape;
  base.data_bytes = nbytes;
  if (nbytes > 0) {
    if (e.storage == 0) return j.unsupported("no storage allocated: every element is the fill value");
    if (e.storage != nbytes) {
      return Status::corruption(j.where + ": expected " + std::to_string(nbytes) + " bytes for " +
                                dtype_name(*j.dtype) + " " + shape_to_string(j.shape) + ", storage has " +
                                std::to_string(e.storage));
    }
    if (!e.has_offset) return j.unsupported("contiguous but with no address in this file (external storage)");
    if (!range_within(e.addr, nbytes, j.file_size)) {
      return Status::corruption(j.where + ": payload of " + std::to_string(nbytes) + " bytes at offset " +
                                std::to_string(e.addr) + " is outside the file (" +
                                std::to_string(j.file_size) + " bytes)");
    }
    base.data_offset = e.addr;
  }
  CKPT_RETURN_IF_ERROR(check_chunk_geometry(base, j.where));
  j.out->chunks.push_back(std::move(base));
  return Status::ok();
}

// Phase 2b: chunked, unfiltered: every chunk allocated, on the grid, once; each chunk stores the
// full chunk box, so an edge chunk is a plain row-major box only when clipped in dim 0 alone.
Status judge_chunked(const GenericJudgment& j, const ChunkInfo& base) {
  const GenericReport& g = j.g;
  const std::vector<uint64_t>& dims = g.extent.dims;
  uint64_t expected = 1, box_elems = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (g.chunk_dims[d] == 0) return Status::corruption(j.where + ": chunk dimension 0");
    const uint64_t per_dim = dims[d] / g.chunk_dims[d] + (dims[d] % g.chunk_dims[d] != 0);
    if ((per_dim && expected > UINT64_MAX / per_dim) || box_elems > UINT64_MAX / g.chunk_dims[d])
      return Status::corruption(j.where + ": chunk grid overflows");
    expected *= per_dim;
    box_elems *= g.chunk_dims[d];
  }
  const uint64_t elem = dtype_size(*j.dtype);
  if (box_elems > UINT64_MAX / elem) return Status::corruption(j.where + ": chunk size overflows");
  if (g.stored.size() != expected) {
    return j.unsupported("sparse: " + std::to_string(g.stored.size()) + " of " + std::to_string(expected) +
                         " chunks allocated, the rest read as the fill value");
  }
  std::vector<ChunkInfo> chunks;
  std::set<std::vector<int64_t>> seen;
  for (const GenericReport::StoredChunk& sc : g.stored) {
    ChunkInfo c = base;
    c.offsets = sc.offsets;
    c.shape.clear();
    for (size_t d = 0; d < dims.size(); ++d) {
      const uint64_t o = static_cast<uint64_t>(sc.offsets[d]);
      if (o >= dims[d] || o % g.chunk_dims[d] != 0) {
        return Status::corruption(j.where + ": chunk at " + shape_to_string(sc.offsets) +
                                  " is not on the chunk grid of " + shape_to_string(j.shape));
      }
      const uint64_t extent = std::min<uint64_t>(g.chunk_dims[d], dims[d] - o);
      if (d > 0 && extent != g.chunk_dims[d]) {
        return j.unsupported("chunked with edge chunks clipped in dimension " + std::to_string(d) +
                             ": their stored rows are padded, not a plain byte range");
      }
      c.shape.push_back(static_cast<int64_t>(extent));
    }
    if (!seen.insert(sc.offsets).second)
      return Status::corruption(j.where + ": chunk at " + shape_to_string(sc.offsets) + " is stored twice");
    if (sc.size != box_elems * elem) {
      return Status::corruption(j.where + ": chunk at " + shape_to_string(sc.offsets) + " stores " +
                                std::to_string(sc.size) + " bytes, expected " +
                                std::to_string(box_elems * elem));
    }
    if (!range_within(sc.addr, sc.size, j.file_size)) {
      return Status::corruption(j.where + ": chunk at " + shape_to_string(sc.offsets) + ": " +
                                std::to_string(sc.size) + " bytes at offset " + std::to_string(sc.addr) +
                                " are outside the file (" + std::to_string(j.file_size) + " bytes)");
    }
    c.data_offset = sc.addr;
    c.data_bytes = *checked_nbytes(c.shape, c.dtype);
    CKPT_RETURN_IF_ERROR(check_chunk_geometry(c, j.where));
    chunks.push_back(std::move(c));
  }
  std::sort(chunks.begin(), chunks.end(),
            [](const ChunkInfo& a, const ChunkInfo& b) { return a.offsets < b.offsets; });
  for (auto& c : chunks) j.out->chunks.push_back(std::move(c));
  return Status::ok();
}

// The parent's judgment of a generic dataset: its chunks (one for a contiguous dataset, one per
// HDF5 chunk for a chunked, unfiltered one), or an entry in `out->unsupported` saying why its
// values cannot be read as plain byte ranges. Numbers that contradict each other or the file are
// corruption, as for our own datasets.
Status generic_from_report(ReportReader& r, uint64_t file_size, const std::string& path, ParsedHdf5* out) {
  CKPT_ASSIGN_OR_RETURN(const GenericReport g, read_generic_report(r, path));
  ++out->generic_datasets;
  GenericJudgment j{g, file_size, path + ": dataset '/" + g.ds_name + "'", std::nullopt, {}, out};
  for (DType d : kGenericDTypes) {
    if (!j.dtype && (g.type_mask & dtype_bit(d))) j.dtype = d;
  }
  for (uint64_t d : g.extent.dims) {
    if (d > static_cast<uint64_t>(INT64_MAX)) return Status::corruption(j.where + ": dimension too large");
    j.shape.push_back(static_cast<int64_t>(d));
  }
  if (g.extent.rank < 0) return j.unsupported("unreadable dataspace");
  if (!j.dtype)
    return j.unsupported("HDF5 type " + g.type_desc + " is not a little-endian IEEE float or integer");
  const auto nbytes = checked_nbytes(j.shape, *j.dtype);
  if (!nbytes) return Status::corruption(j.where + ": shape " + shape_to_string(j.shape) + " overflows");
  if (g.filters != 0) {
    return j.unsupported("filtered (" +
                         (g.filters < 0 ? std::string("unreadable filter pipeline") : g.filter_names) +
                         "): its stored bytes are not its values, and ckptcheck does not run libhdf5's "
                         "decoders on untrusted bytes");
  }
  ChunkInfo base;
  base.name = g.ds_name;
  base.component = "model";
  base.dtype = *j.dtype;
  base.global_shape = j.shape;
  base.offsets.assign(j.shape.size(), 0);
  if (g.layout == H5D_CONTIGUOUS) return judge_contiguous(j, std::move(base), *nbytes);
  if (g.layout == H5D_COMPACT)
    return j.unsupported("compact layout: its values live inside the object header");
  if (g.layout != H5D_CHUNKED)
    return j.unsupported("layout " + std::to_string(g.layout) + " (virtual or unknown)");
  if (g.chunk_state == kChunksTooMany)
    return j.unsupported("more than " + std::to_string(kHdf5MaxChunks) + " HDF5 chunks in the file");
  if (g.chunk_state != kChunksListed) return j.unsupported("chunked, and its chunk table could not be read");
  return judge_chunked(j, base);
}

Result<ParsedHdf5> judge_report(const std::string& report, uint64_t file_size, const std::string& path) {
  ReportReader r(report);
  const uint8_t kind = r.u8();
  if (r.ok() && kind == kReportError) {
    const uint8_t code = r.u8();
    std::string message = r.str(kMaxDatasetPathBytes + 8192, "error message");
    if (!r.ok() || !r.at_end()) {
      return Status::corruption(path + ": hdf5 parser child sent a malformed report: " + r.error());
    }
    // The child reports what a reader may: damage, a refusal, or the OS saying no.
    switch (static_cast<StatusCode>(code)) {
      case StatusCode::kCorruption: return Status::corruption(std::move(message));
      case StatusCode::kTruncated: return Status::truncated(std::move(message));
      case StatusCode::kNotSupported: return Status::not_supported(std::move(message));
      case StatusCode::kIoError: return Status::io_error(std::move(message));
      default:
        return Status::corruption(path + ": hdf5 parser child reported status code " + std::to_string(code) +
                                  ": " + message);
    }
  }
  if (r.ok() && kind != kReportFacts) r.fail("report kind " + std::to_string(kind));
  ParsedHdf5 out;
  const bool has_metadata = r.u8() != 0;
  const std::string text = has_metadata ? r.str(kMaxStringAttribute, "metadata") : std::string();
  nlohmann::json keras_code = nlohmann::json::array();
  for (const char* name : kKerasConfigAttributes) {
    if (!r.ok() || r.u8() == 0) continue;
    const std::string config = r.str(kMaxStringAttribute, name);
    if (!r.ok()) break;
    for (const KerasCodeReference& k : find_keras_code(name, config))
      keras_code.push_back({{"attribute", k.attribute},
                            {"layer", k.layer},
                            {"class_name", k.class_name},
                            {"reason", k.reason}});
  }
  const uint64_t count = r.u64();
  if (r.ok() && count > kHdf5MaxDatasets) r.fail(std::to_string(count) + " datasets");
  if (!r.ok()) return Status::corruption(path + ": hdf5 parser child sent a malformed report: " + r.error());
  if (has_metadata) {
    CKPT_ASSIGN_OR_RETURN(out.metadata, parse_json(text, path + ": " + kHdf5MetadataAttribute));
  }
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t dataset_kind = r.u8();
    if (r.ok() && dataset_kind == kDatasetGeneric) {
      CKPT_RETURN_IF_ERROR(generic_from_report(r, file_size, path, &out));
      continue;
    }
    if (r.ok() && dataset_kind != kDatasetOurs) r.fail("dataset kind " + std::to_string(dataset_kind));
    if (!r.ok())
      return Status::corruption(path + ": hdf5 parser child sent a malformed report: " + r.error());
    CKPT_ASSIGN_OR_RETURN(ChunkInfo c, chunk_from_report(r, file_size, path));
    out.chunks.push_back(std::move(c));
  }
  if (!keras_code.empty()) out.metadata["keras_code"] = std::move(keras_code);
  if (out.generic_datasets > 0) {
    out.metadata["hdf5_generic_datasets"] = out.generic_datasets;
    out.metadata["unsupported_datasets"] = std::move(out.unsupported);
  }
  if (!r.at_end()) {
    return Status::corruption(path + ": hdf5 parser child sent a malformed report: " +
                              std::to_string(report.size()) + " bytes, trailing data after the last dataset");
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path) {
  return open_hdf5(path, IsolationLimits{});
}

Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path, const IsolationLimits& limits) {
  // Loaded here, before the fork: the child never runs the dynamic loader, which another thread of
  // this process may hold locked at fork().
  CKPT_RETURN_IF_ERROR(hdf5::load_library());
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  const uint64_t size = source->size();
  // The child parses the very file this source has open (its inherited descriptor), so a path
  // replaced in between cannot give us a chunk table for one file and payloads from another.
  const std::string fd_path = "/proc/self/fd/" + std::to_string(source->fd());
  const std::string open_path = ::access(fd_path.c_str(), R_OK) == 0 ? fd_path : path;
  IsolationLimits child_limits = limits;
  child_limits.fork_lock = &hdf5::library_mutex();
  CKPT_ASSIGN_OR_RETURN(IsolatedOutcome outcome,
                        run_isolated([&] { return parse_in_child(open_path, path); }, child_limits));
  if (!outcome.completed) return Status::corruption(path + ": hdf5 parser child " + outcome.failure);
  CKPT_ASSIGN_OR_RETURN(ParsedHdf5 parsed, judge_report(outcome.output, size, path));
  return std::unique_ptr<TensorFile>(
      new MappedTensorFile("hdf5", std::move(source), std::move(parsed.chunks), std::move(parsed.metadata)));
}

}  // namespace ckpt
