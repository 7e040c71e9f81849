// HDF5 shards: one .h5 file per shard, written and read through the HDF5 C library.
//   /                         file attribute ckptcheck_metadata: JSON string (step, shard_index, ...)
//   /<escaped tensor name>/   one group per tensor
//       <range>               one dataset per chunk: "0:128,0:64", or "all" for a whole tensor
// Datasets are contiguous and unfiltered, so each payload is one byte range in the file
// (H5Dget_offset) and is hashed and read as raw bytes like every other format. Attributes per
// dataset: name, component, dtype (our name), sha256 (fixed-length strings), global_shape, offsets
// (int64 arrays). BF16 is stored as a uint16 dataset with dtype="BF16" (bit-exact; HDF5 has no
// bfloat16), BOOL as uint8, F16 as a 16-bit IEEE float type (what h5py uses for float16).
// Name escaping: '%' -> "%25", '/' -> "%2F", and a name that is "." or ".." has its dots as "%2E".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "formats/shard_file_writer.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr const char* kHdf5MetadataAttribute = "ckptcheck_metadata";
constexpr size_t kHdf5MaxDatasets = 1'000'000;

Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path);

Result<WrittenFile> write_hdf5_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                    const nlohmann::json& metadata);

// The group name a tensor's chunks live under (see the escaping rule above).
std::string hdf5_group_name(const std::string& tensor_name);

}  // namespace ckpt
