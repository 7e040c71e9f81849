// The typed reader of a DCP `.metadata`: the pickle torch's FileSystemWriter writes
// (pickle.dump(Metadata), protocols 2-5), read straight into DcpMetadata's records.
//
// Why a second reader: the restricted VM (formats/pickle_reader.h) keeps every value as a general
// node and flattens the tree to JSON, about 200 bytes a value and ten values a chunk, and its bounds
// (a million memo entries, four million values) stop it near 60,000 chunks. FSDP and tensor-parallel
// runs write 10^5 to 10^6. This reader keeps each value in 8 bytes (strings in one buffer,
// containers in one pool), so memory follows the chunks, and a value that is used once is never
// copied. Three further choices keep the parse of a 1M-chunk `.metadata` under 3x the file's size
// (issue 44; docs/performance.md has the measurements):
//   - a ChunkStorageMetadata, MetadataIndex or _StorageInfo becomes a small record at its BUILD, and
//     the ~10 values its NEWOBJ..BUILD made are let go (dcp_metadata_reader.cpp, Region);
//   - equal strings and tuples that outlive that are one value, and the records share them
//     (SharedText, SharedDims);
//   - a file is read a window at a time, never held whole.
//
// It reads only what torch writes: the opcodes of protocols 2-5 for str, int, float, bool, None,
// tuple, list, dict, globals, NEWOBJ / REDUCE / BUILD on globals, and the memo. A pickle with anything
// else (bytes, sets, persistent ids, tensors, a global the VM interprets besides torch.Size /
// OrderedDict / defaultdict, invalid UTF-8, a shape the records below do not expect) is not its to
// judge: it returns nullopt and parse_dcp_metadata gives the pickle to the restricted VM, whose
// messages and limits apply. Globals are never imported or called; each is listed with its risk and
// uses exactly as the VM lists them (the conformance test reads every fixture both ways).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/byte_source.h"
#include "base/status.h"
#include "formats/dcp_metadata.h"

namespace ckpt {

// nullopt: not a pickle of the shape torch writes (read it with the restricted VM). A Result: the
// records (not yet finished: see finish_dcp_metadata), or what is wrong with them (a chunk outside
// its tensor, a size that overflows, too many items), with the same message the VM's reading gives.
std::optional<Result<DcpMetadata>> read_dcp_metadata_typed(const uint8_t* data, size_t size,
                                                           const std::string& where);
// The same reading of a file, window_bytes at a time: the pickle's bytes are never all in memory.
// A read that fails is nullopt too (the VM's own read of the file reports it). Tests make the window
// small, so that values are split across reads.
constexpr size_t kDcpMetadataWindowBytes = size_t{4} << 20;
std::optional<Result<DcpMetadata>> read_dcp_metadata_typed(const ByteSource& source, const std::string& where,
                                                           size_t window_bytes = kDcpMetadataWindowBytes);

}  // namespace ckpt
