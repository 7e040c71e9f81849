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
// with pread, like every other format. Our own datasets must be contiguous and unfiltered
// (kNotSupported otherwise, naming the dataset).
//
// Files we did not write (Keras `.weights.h5`/`.h5`, anything h5py wrote): a dataset without our
// `dtype` and `component` attributes, in a file without ckptcheck_metadata, is *generic*: named by
// its path ("layers/dense/vars/0"), component "model", dtype from its HDF5 type (little-endian IEEE
// F16/F32/F64, I8-I64, U8-U64). Contiguous datasets are one chunk; chunked, unfiltered datasets are
// one chunk per HDF5 chunk (every chunk allocated, on the grid, once, and clipped only in dim 0, so
// each is a plain row-major box). Anything else (a filter such as gzip, a string, compound,
// big-endian or enum type, a sparse or never-written dataset, compact or virtual layout, edge
// chunks clipped in another dim) is listed in metadata()["unsupported_datasets"] as {path, type,
// shape, reason} and never read: decoding would mean running libhdf5's filters on untrusted bytes.
// metadata()["hdf5_generic_datasets"] counts generic datasets. A child that crashes, exceeds a limit or
// overruns its time is Status::corruption("<file>: hdf5 parser child killed by SIGSEGV").
// The writer runs libhdf5 in-process (it only writes our own data), for the metadata only: payloads
// are streamed by our own writer, hashed once (formats/hdf5_writer.cpp). Payloads of 4 KiB and
// more start on a 4 KiB boundary. Shards written before that (the whole file hashed, sha256_of
// "file" in the manifest) read and verify as before.
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
// HDF5 chunks of generic datasets listed per file. libhdf5 1.10's H5Dget_chunk_info(i) walks the
// chunk index from the start on every call, so listing n chunks costs O(n^2) in the parser child.
constexpr uint64_t kHdf5MaxChunks = 4096;

Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path);
// The same with the parser child's limits chosen by the caller (tests: a short deadline). The
// default: 10 s wall clock, 10 s CPU, 1 GiB of address space above this process, 256 MiB report.
Result<std::unique_ptr<TensorFile>> open_hdf5(const std::string& path, const IsolationLimits& limits);

Result<WrittenFile> write_hdf5_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                    const nlohmann::json& metadata);

// The group name a tensor's chunks live under (see the escaping rule above).
std::string hdf5_group_name(const std::string& tensor_name);

}  // namespace ckpt
