// write_hdf5_file: HDF5 shards at the speed of the other formats.
//
// libhdf5 is slow at moving payload bytes (its buffered writes, then an fsync that waits for all of
// them, under a library-wide lock that serializes every shard writer in the process) but is the
// only sane way to write HDF5 metadata. So the writer works in two phases:
//
// 1. Layout. libhdf5 builds the whole file in a sparse scratch file beside it: the metadata
//    attribute, every group, dataset and attribute. Datasets are contiguous with *late* allocation,
//    so no payload space exists until every piece of metadata has been placed; then one element of
//    each dataset is written, which allocates its payload after all metadata, 4 KiB-aligned when
//    it is at least 4 KiB. The sha256 attributes hold placeholders (a per-file random marker and
//    the chunk's index). Only the metadata prefix and one element per payload are ever written
//    there; the rest of the scratch file is sparse.
// 2. Stream. The real file is written front to back by StreamingFileWriter, as native and
//    safetensors shards are: the metadata prefix (held in memory), then each payload at the offset
//    libhdf5 gave it, hashed once from the copy, with zeros between payloads. Once every payload's
//    SHA-256 is known the placeholders in the held prefix are replaced, and the prefix goes to disk
//    last, so a torn file never has a valid superblock.
//
// The superblock is version 0 and object headers version 1 (libhdf5's defaults): they carry no
// checksums, so replacing a fixed-length string attribute's bytes in place is a valid edit.
// Everything after the first payload that is not a payload is zero (checked on the scratch file),
// so the shard's digest covers the metadata prefix only (sha256_of "header"): the prefix holds
// every payload's SHA-256 and offset, a two-level hash tree as for native and safetensors shards.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <string_view>

#include "base/sha256.h"
#include "base/streaming_file_writer.h"
#include "formats/hdf5_file.h"
#include "formats/hdf5_library.h"

namespace ckpt {

namespace {

using hdf5::Handle;
using hdf5::library_failure;

// Allocations of at least this many bytes (payloads of 4 KiB and more) start on a page, so a load
// can map them in place and a verify reads them page-aligned.
constexpr hsize_t kHdf5PayloadAlignment = 4096;

// A sha256 attribute's placeholder: kPlaceholderMarkerBytes of marker (fixed text + the file's
// random nonce), then the chunk's index in decimal, zero-padded to 64 characters in all.
constexpr size_t kSha256HexBytes = 64;
constexpr size_t kPlaceholderMarkerBytes = 32;

// The random part keeps a tensor name or a metadata value that happens to contain the fixed text
// from being taken for a placeholder.
std::string placeholder_marker() {
  std::random_device entropy;
  static const char kHex[] = "0123456789abcdef";
  std::string marker = "ckptcheck:sha256:";
  while (marker.size() < kPlaceholderMarkerBytes - 1) marker += kHex[entropy() % 16];
  return marker + ":";
}

// The chunk index a placeholder's digits name, or nullopt when they are not a placeholder's.
std::optional<size_t> placeholder_index(std::string_view digits) {
  size_t index = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9' || index > (SIZE_MAX - 9) / 10) return std::nullopt;
    index = index * 10 + static_cast<size_t>(ch - '0');
  }
  return index;
}

std::string placeholder(const std::string& marker, size_t index) {
  std::string digits = std::to_string(index);
  return marker + std::string(kSha256HexBytes - marker.size() - digits.size(), '0') + digits;
}

Status write_string_attr(hid_t obj, const char* name, const std::string& value, const std::string& path) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!type.valid() || H5Tset_size(type.get(), std::max<size_t>(1, value.size())) < 0)
    return library_failure(path, "string type");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), padded.data()) < 0) {
    return library_failure(path, std::string("write of attribute ") + name);
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
    return library_failure(path, std::string("write of attribute ") + name);
  }
  return Status::ok();
}

// "/<escaped tensor name>/<chunk ranges>": where a chunk's dataset lives.
std::string dataset_path(const ChunkInfo& c) {
  return "/" + hdf5_group_name(c.name) + "/" + hdf5::chunk_dataset_name(c);
}

// One chunk's dataset, its payload space not yet allocated.
Status create_dataset(hid_t file, const ChunkPayload& c, const std::string& sha256_placeholder,
                      const std::string& path) {
  const std::string group = "/" + hdf5_group_name(c.info.name);
  if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0) {
    Handle g(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!g.valid()) return library_failure(path, "create of group " + group);
  }
  const std::string ds_name = dataset_path(c.info);
  std::vector<hsize_t> dims(c.info.shape.begin(), c.info.shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle type(hdf5::file_type(c.info.dtype), H5Tclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!space.valid() || !type.valid() || !dcpl.valid() || H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS) < 0 ||
      H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_LATE) < 0 ||
      H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) {
    return library_failure(path, "dataset setup for " + c.info.label());
  }
  Handle ds(H5Dcreate2(file, ds_name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
            H5Dclose);
  if (!ds.valid()) return library_failure(path, "create of dataset " + ds_name);
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "name", c.info.name, path));
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "component", c.info.component, path));
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "dtype", dtype_name(c.info.dtype), path));
  CKPT_RETURN_IF_ERROR(write_string_attr(ds.get(), "sha256", sha256_placeholder, path));
  CKPT_RETURN_IF_ERROR(write_dims_attr(ds.get(), "global_shape", c.info.global_shape, path));
  return write_dims_attr(ds.get(), "offsets", c.info.offsets, path);
}

// Allocates a non-empty dataset's payload space by writing its first element (libhdf5 allocates
// contiguous storage on the first write; the element's bytes are the payload's own, or zeros for a
// payload read later from its reader: the streamed payload replaces them anyway, and they lie past
// the metadata prefix that is all the stream phase keeps of the scratch file). Returns the
// payload's offset.
Result<uint64_t> allocate_payload(hid_t file, const ChunkPayload& c, const std::string& path) {
  const std::string ds_name = dataset_path(c.info);
  Handle ds(H5Dopen2(file, ds_name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle type(hdf5::file_type(c.info.dtype), H5Tclose);
  Handle file_space(ds.valid() ? H5Dget_space(ds.get()) : -1, H5Sclose);
  if (!ds.valid() || !type.valid() || !file_space.valid()) return library_failure(path, "open of " + ds_name);
  const hsize_t one = 1;
  Handle memory_space(H5Screate_simple(1, &one, nullptr), H5Sclose);
  if (!c.info.shape.empty()) {
    const std::vector<hsize_t> start(c.info.shape.size(), 0), count(c.info.shape.size(), 1);
    if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) <
        0)
      return library_failure(path, "selection in " + ds_name);
  }
  const hid_t memory = c.info.shape.empty() ? H5S_ALL : memory_space.get();
  const hid_t on_file = c.info.shape.empty() ? H5S_ALL : file_space.get();
  // Memory type == file type: little-endian bytes go in unconverted.
  static const uint8_t kZeroElement[64] = {};
  static_assert(sizeof(kZeroElement) >= 16, "one element of the widest dtype");
  const void* first_element = c.data ? static_cast<const void*>(c.data) : kZeroElement;
  if (H5Dwrite(ds.get(), type.get(), memory, on_file, H5P_DEFAULT, first_element) < 0)
    return library_failure(path, "allocation of " + ds_name);
  const haddr_t addr = H5Dget_offset(ds.get());
  if (addr == HADDR_UNDEF) return library_failure(path, "offset of dataset " + ds_name);
  return static_cast<uint64_t>(addr);
}

// The scratch file libhdf5 lays the shard out in: beside the shard (the same, writable
// filesystem; libhdf5 needs a real path, so an anonymous memfd will not do), sparse, never synced,
// and removed as soon as its layout is read, so its few pages rarely reach the disk.
class ScratchFile {
 public:
  static Result<ScratchFile> create(const std::string& path) {
    std::string name = path + ".layout.XXXXXX";
    const int fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0)
      return Status::io_error(name + ": cannot create the layout scratch file: " + std::strerror(errno));
    return ScratchFile(fd, std::move(name));
  }
  ScratchFile(ScratchFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() {
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  Result<uint64_t> size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::io_error(path_ + ": cannot stat: " + std::strerror(errno));
    return static_cast<uint64_t>(st.st_size);
  }
  Status read(uint64_t offset, void* out, size_t n) const {
    auto* p = static_cast<uint8_t*>(out);
    for (size_t done = 0; done < n;) {
      const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return Status::io_error(path_ + ": cannot read at " + std::to_string(offset + done));
      done += static_cast<size_t>(got);
    }
    return Status::ok();
  }

 private:
  ScratchFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;  // libhdf5 opens the path on its own; this descriptor reads what it wrote
  std::string path_;
};

// What the layout phase leaves for the stream phase.
struct Hdf5Layout {
  std::string prefix;                               // bytes [0, first payload): all the file's metadata
  uint64_t file_bytes = 0;                          // the file's size (the superblock's end-of-file address)
  std::vector<uint64_t> payload_offset;             // per chunk (0 for an empty one)
  std::vector<size_t> order;                        // non-empty chunks by payload offset
  std::vector<std::vector<size_t>> placeholder_at;  // per chunk: where its sha256 placeholder is
};

Status run_library(const std::string& scratch_path, const std::vector<ChunkPayload>& chunks,
                   const nlohmann::json& metadata, const std::string& marker, const std::string& path,
                   Hdf5Layout* layout) {
  std::lock_guard<std::mutex> lock(hdf5::library_mutex());
  hdf5::silence_errors();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_alignment(fapl.get(), kHdf5PayloadAlignment, kHdf5PayloadAlignment) < 0)
    return library_failure(path, "file access setup");
  Handle file(H5Fcreate(scratch_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.valid()) return library_failure(path, "create of the layout scratch file");
  CKPT_RETURN_IF_ERROR(write_string_attr(file.get(), kHdf5MetadataAttribute, metadata.dump(), path));
  for (size_t i = 0; i < chunks.size(); ++i)
    CKPT_RETURN_IF_ERROR(create_dataset(file.get(), chunks[i], placeholder(marker, i), path));
  layout->payload_offset.assign(chunks.size(), 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].info.data_bytes == 0) continue;
    CKPT_ASSIGN_OR_RETURN(layout->payload_offset[i], allocate_payload(file.get(), chunks[i], path));
  }
  // Closing writes the metadata out of libhdf5's cache into the scratch file.
  if (H5Fclose(file.release()) < 0) return library_failure(path, "close of the layout scratch file");
  return Status::ok();
}

// Checks the scratch file is what the stream phase assumes: payloads inside the file, not
// overlapping, every non-payload byte after the first payload zero (no metadata there), and each
// placeholder in the prefix.
Status check_and_read_layout(const ScratchFile& scratch, const std::vector<ChunkPayload>& chunks,
                             const std::string& marker, const std::string& path, Hdf5Layout* layout) {
  CKPT_ASSIGN_OR_RETURN(layout->file_bytes, scratch.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].info.data_bytes) layout->order.push_back(i);
  }
  std::sort(layout->order.begin(), layout->order.end(),
            [&](size_t a, size_t b) { return layout->payload_offset[a] < layout->payload_offset[b]; });
  const uint64_t first =
      layout->order.empty() ? layout->file_bytes : layout->payload_offset[layout->order[0]];
  std::vector<uint8_t> gap;
  uint64_t at = first;
  auto check_zero = [&](uint64_t begin, uint64_t end) -> Status {
    gap.resize(static_cast<size_t>(end - begin));
    CKPT_RETURN_IF_ERROR(scratch.read(begin, gap.data(), gap.size()));
    if (std::any_of(gap.begin(), gap.end(), [](uint8_t b) { return b != 0; })) {
      return Status::io_error(path + ": HDF5 layout put metadata at offset " + std::to_string(begin) +
                              ", after the first payload (" + std::to_string(first) + ")");
    }
    return Status::ok();
  };
  for (size_t i : layout->order) {
    const uint64_t offset = layout->payload_offset[i];
    const uint64_t size = chunks[i].info.data_bytes;
    if (offset < at || offset > layout->file_bytes || size > layout->file_bytes - offset) {
      return Status::io_error(path + ": HDF5 layout put the payload of " + chunks[i].info.label() +
                              " at offset " + std::to_string(offset) +
                              ", overlapping another or past the end");
    }
    CKPT_RETURN_IF_ERROR(check_zero(at, offset));
    at = offset + size;
  }
  CKPT_RETURN_IF_ERROR(check_zero(at, layout->file_bytes));

  layout->prefix.resize(static_cast<size_t>(first));
  CKPT_RETURN_IF_ERROR(scratch.read(0, layout->prefix.data(), layout->prefix.size()));
  layout->placeholder_at.assign(chunks.size(), {});
  for (size_t pos = layout->prefix.find(marker); pos != std::string::npos;
       pos = layout->prefix.find(marker, pos + 1)) {
    if (pos + kSha256HexBytes > layout->prefix.size()) break;
    const std::optional<size_t> index = placeholder_index(
        std::string_view(layout->prefix).substr(pos + marker.size(), kSha256HexBytes - marker.size()));
    // More than one copy can exist (libhdf5 may leave a stale one behind a moved message):
    // every copy is replaced, the stale ones harmlessly.
    if (index && *index < chunks.size()) layout->placeholder_at[*index].push_back(pos);
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (layout->placeholder_at[i].empty()) {
      return Status::io_error(path + ": HDF5 layout has no sha256 attribute for " + chunks[i].info.label() +
                              " in its metadata prefix");
    }
  }
  return Status::ok();
}

Result<WrittenFile> stream_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                Hdf5Layout& layout) {
  WrittenFile out;
  out.path = path;
  out.sha256_of = "header";
  out.bytes = layout.file_bytes;
  StreamingFileWriter::Options options;
  options.held_prefix_bytes = layout.prefix.size();
  CKPT_ASSIGN_OR_RETURN(auto file, StreamingFileWriter::create_exclusive(path, options));
  auto fail = [&](Status s) -> Status {
    file.reset();
    ::unlink(path.c_str());  // a half-written shard must not look like a shard
    return s;
  };
  Status s = file->append(layout.prefix.data(), layout.prefix.size());
  std::vector<std::string> sha256(chunks.size(), sha256_hex(nullptr, 0));
  for (size_t i : layout.order) {
    if (!s.is_ok()) break;
    s = file->append_zeros(static_cast<size_t>(layout.payload_offset[i] - file->bytes_appended()));
    Sha256 hash;
    if (s.is_ok()) s = append_payload(*file, chunks[i], chunks[i].info.data_bytes, &hash);
    sha256[i] = hash.finish_hex();
  }
  if (s.is_ok()) s = file->append_zeros(static_cast<size_t>(layout.file_bytes - file->bytes_appended()));
  for (size_t i = 0; i < chunks.size() && s.is_ok(); ++i) {
    for (size_t pos : layout.placeholder_at[i]) {
      std::memcpy(&layout.prefix[pos], sha256[i].data(), kSha256HexBytes);
      s = file->patch_prefix(pos, sha256[i].data(), kSha256HexBytes);
      if (!s.is_ok()) break;
    }
  }
  if (s.is_ok()) s = file->finish();
  if (!s.is_ok()) return fail(std::move(s));
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkInfo info = chunks[i].info;
    info.sha256 = sha256[i];
    info.data_offset = layout.payload_offset[i];
    out.chunks.push_back(std::move(info));
  }
  out.sha256 = sha256_hex(layout.prefix.data(), layout.prefix.size());
  return out;
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
  CKPT_RETURN_IF_ERROR(hdf5::load_library());
  CKPT_RETURN_IF_ERROR(check_chunk_payloads(chunks));
  // Refuse an existing path before any work (the stream phase's O_EXCL would, later).
  if (::access(path.c_str(), F_OK) == 0) return Status::io_error(path + ": cannot create: file exists");
  const std::string marker = placeholder_marker();
  Hdf5Layout layout;
  {
    CKPT_ASSIGN_OR_RETURN(ScratchFile scratch, ScratchFile::create(path));
    CKPT_RETURN_IF_ERROR(run_library(scratch.path(), chunks, metadata, marker, path, &layout));
    CKPT_RETURN_IF_ERROR(check_and_read_layout(scratch, chunks, marker, path, &layout));
  }
  return stream_file(path, chunks, layout);
}

}  // namespace ckpt
