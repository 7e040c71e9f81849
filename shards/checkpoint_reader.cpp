#include "shards/checkpoint_reader.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/byte_source.h"
#include "base/file_io.h"
#include "base/mapped_file.h"
#include "base/sha256.h"
#include "formats/hdf5_metadata_prefix.h"
#include "formats/mapped_tensor_file.h"
#include "formats/native_shard.h"
#include "formats/shard_formats.h"
#include "shards/laid_out_native_shard.h"
#include "shards/mapped_checkpoint.h"

namespace ckpt {

namespace {

Result<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf))
    return Status::io_error(path + ": cannot resolve: " + std::strerror(errno));
  return std::string(buf);
}

}  // namespace

const ChunkInfo* find_file_chunk(const TensorFile& file, const std::string& name, const ManifestChunk& chunk,
                                 size_t* index_out) {
  const auto& chunks = file.chunks();
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].name == name && chunks[i].offsets == chunk.offsets && chunks[i].shape == chunk.shape) {
      *index_out = i;
      return &chunks[i];
    }
  }
  return nullptr;
}

Result<std::string> resolve_shard_path(const std::string& checkpoint_dir, const std::string& relative) {
  if (!is_safe_relative_path(relative)) {
    return Status::corruption(checkpoint_dir + ": shard path '" + relative +
                              "' leaves the checkpoint directory");
  }
  const std::string path = checkpoint_dir + "/" + relative;
  if (!path_exists(path)) return Status::not_found(path + ": shard file is missing");
  CKPT_ASSIGN_OR_RETURN(std::string dir_real, real_path(checkpoint_dir));
  CKPT_ASSIGN_OR_RETURN(std::string file_real, real_path(path));
  if (file_real.compare(0, dir_real.size() + 1, dir_real + "/") != 0) {
    return Status::corruption(path + ": resolves to " + file_real + ", outside the checkpoint directory");
  }
  if (!is_regular_file(file_real)) return Status::corruption(path + ": not a regular file");
  return path;
}

namespace {

// A shard whose recorded digest covers all of its metadata: an HDF5 shard written since issue 32
// (every metadata byte before its first payload, formats/README.md) or a native one (preamble and
// header). When those bytes hash to the recorded digest they are byte for byte what the writer laid
// out, so the manifest's chunk table (recorded from that same layout) describes the file, and the
// shard opens without a second parse of its metadata: for HDF5 that is libhdf5 in a child process
// (tens of milliseconds a shard in a process holding GiBs); for native, 20,000 chunks of header
// JSON a shard, which verify has already compared with the manifest chunk by chunk (issue 44:
// verify's resume-scalar check parsed every header a second time, a third of `verify --quick`).
// Null when the shard is not such a shard or its bytes do not match: the format's reader then
// opens it and names what is wrong.
// `matched`: the caller has compared a native header with the manifest byte for byte (kForLoadHeaderMatched).
Result<std::unique_ptr<TensorFile>> open_by_matching_header(const std::string& path, const Manifest& manifest,
                                                            size_t index, const TensorSelect& select,
                                                            bool matched) {
  const ManifestShard& shard = manifest.shards[index];
  const bool hdf5 = shard.format == "hdf5";
  matched = matched && shard.format == "native";
  if (!matched && ((!hdf5 && shard.format != "native") || shard.sha256_of != "header"))
    return std::unique_ptr<TensorFile>();
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  if (source->size() != shard.bytes) return std::unique_ptr<TensorFile>();
  std::vector<ChunkInfo> chunks;
  for (const ManifestTensor& t : manifest.tensors) {
    // HDF5's metadata ends where its first payload starts: that needs every chunk.
    if (!hdf5 && select && !select(t)) continue;
    for (const ManifestChunk& mc : t.chunks) {
      if (mc.shard != index) continue;
      // What the format's reader checks of every chunk it parses, so a manifest without a digest
      // of its own cannot describe a chunk whose copy reads outside its bytes.
      const auto nbytes = checked_nbytes(mc.shape, t.dtype);
      if (!chunk_lies_inside(t.shape, mc.offsets, mc.shape) || !nbytes || *nbytes != mc.data_bytes ||
          !range_within(mc.data_offset, mc.data_bytes, source->size()))
        return std::unique_ptr<TensorFile>();
      chunks.push_back(chunk_info_of(t, mc));
    }
  }
  if (!matched) {
    auto digest = hdf5 ? sha256_hex_of_range(*source, 0, hdf5_metadata_prefix_end(chunks, source->size()))
                       : native_shard_header_digest(*source);
    if (!digest.is_ok() || *digest != shard.sha256) return std::unique_ptr<TensorFile>();
  }
  return std::unique_ptr<TensorFile>(new MappedTensorFile(hdf5 ? "hdf5" : "native", std::move(source),
                                                          std::move(chunks), nlohmann::json::object()));
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_manifest_shard(const std::string& checkpoint_dir,
                                                        const Manifest& manifest, size_t index,
                                                        ShardOpening opening, const TensorSelect& select) {
  const ManifestShard& shard = manifest.shards[index];
  const ShardFormat* format = find_shard_format(shard.format);
  if (!format) return Status::not_supported(shard.path + ": unknown shard format '" + shard.format + "'");
  CKPT_ASSIGN_OR_RETURN(std::string path, resolve_shard_path(checkpoint_dir, shard.path));
  if (opening != ShardOpening::kParseFile) {
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> file,
                          open_by_matching_header(path, manifest, index, select,
                                                  opening == ShardOpening::kForLoadHeaderMatched));
    if (file) return file;
  }
  return format->open(path);
}

void scatter_chunk(DimsView global_shape, size_t element_size, DimsView offsets, DimsView shape,
                   const uint8_t* chunk_bytes, uint8_t* global) {
  const size_t rank = global_shape.size();
  if (rank == 0) {
    std::memcpy(global, chunk_bytes, element_size);
    return;
  }
  // Row-major strides (in elements) of the global tensor.
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) stride[d - 1] = stride[d] * global_shape[d];
  const size_t run_bytes = static_cast<size_t>(shape[rank - 1]) * element_size;
  int64_t runs = 1;
  for (size_t d = 0; d + 1 < rank; ++d) runs *= shape[d];
  std::vector<int64_t> index(rank, 0);  // position inside the chunk, last dim always 0
  for (int64_t r = 0; r < runs; ++r) {
    int64_t element = 0;
    for (size_t d = 0; d < rank; ++d) element += (offsets[d] + index[d]) * stride[d];
    std::memcpy(global + element * static_cast<int64_t>(element_size),
                chunk_bytes + r * static_cast<int64_t>(run_bytes), run_bytes);
    for (size_t d = rank - 1; d-- > 0;) {  // odometer over all dims but the last
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

Result<std::vector<LoadedTensor>> load_checkpoint_tensors(const std::string& checkpoint_dir,
                                                          const Manifest& manifest,
                                                          const LoadOptions& options) {
  CKPT_ASSIGN_OR_RETURN(MappedCheckpoint mapped, map_checkpoint_tensors(checkpoint_dir, manifest, options));
  std::vector<LoadedTensor> loaded;
  loaded.reserve(mapped.tensors().size());
  for (const TensorView& v : mapped.tensors()) {
    std::vector<uint8_t> bytes(v.bytes);
    CKPT_RETURN_IF_ERROR(guarded_copy(bytes.data(), v.data, bytes.size(), v.name));
    loaded.push_back({v.name, v.component, v.dtype, v.shape, std::move(bytes)});
  }
  return loaded;
}

}  // namespace ckpt
