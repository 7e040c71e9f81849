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
//
// Reading untrusted files: libhdf5 1.10 is not a hardened parser (crafted metadata makes it read
// out of bounds, request terabytes or loop), so open_hdf5 never runs it in this process. A forked
// child (base/isolated_call.h, under a wall-clock, CPU and address-space limit) opens the file with
// libhdf5, walks its datasets and reports over a pipe each one's attributes, HDF5 type, layout,
// shape and, for a contiguous dataset, the byte offset and storage size of its payload, plus the
// file's metadata attribute. This process then checks every number (counts and lengths bounded,
// size == shape x dtype size without overflow, payload inside the file) and reads payloads itself
// with pread, like every other format. Chunked or filtered (compressed) datasets are refused
// (kNotSupported, naming the dataset): their bytes are not one file range, and decoding them would
// mean running libhdf5's filters on untrusted bytes here. A child that crashes, exceeds a limit or
// overruns its time is Status::corruption("<file>: hdf5 parser child killed by SIGSEGV").
// The writer runs libhdf5 in-process: it only writes our own data.
//
// Test-only: CKPTCHECK_TEST_HDF5_CHILD_FAULT, read only in the parser child, makes it fail on
// purpose, as a crafted file might: "segv" (a wild write), "hang" (blocks forever), "bad-offset"
// (reports every payload 1 TiB past where it is). Tests use it to prove the parent survives.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/isolated_call.h"
#include "formats/shard_file_writer.h"
#include "formats/tensor_file.h"

namespace ckpt {

constexpr const char* kHdf5MetadataAttribute = "ckptcheck_metadata";
constexpr size_t kHdf5MaxDatasets = 1'000'000;

Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path);
// The same with the parser child's limits chosen by the caller (tests: a short deadline). The
// default: 10 s wall clock, 10 s CPU, 1 GiB of address space above this process, 256 MiB report.
Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path, const IsolationLimits& limits);

Result<WrittenFile> write_hdf5_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                    const nlohmann::json& metadata);

// The group name a tensor's chunks live under (see the escaping rule above).
std::string hdf5_group_name(const std::string& tensor_name);

}  // namespace ckpt
