// The byte-integrity findings that `inspect` and `verify` both make, with one code and one wording
// each, so that a damaged chunk reads the same whichever command found it:
//   chunk_sha256_mismatch  "@OFFSET: sha256 mismatch for LABEL: expected X got Y" (OFFSET: the
//                          chunk's payload in its file, in bytes)
//   zip_crc_mismatch       a torch.save zip member's CRC-32 differs from its bytes
//   zip_header_mismatch    a zip local header (or data descriptor, or PyTorch's padding) disagrees
//                          with the central directory (formats/zip_archive.h check_local_headers)
// verify's full code list is in verifier/check/checkpoint_verifier.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"

namespace ckpt {

namespace verify_code {
constexpr const char* kChunkSha256Mismatch = "chunk_sha256_mismatch";
constexpr const char* kZipCrcMismatch = "zip_crc_mismatch";
constexpr const char* kZipHeaderMismatch = "zip_header_mismatch";
// Bytes that the loader and our reader could read differently (formats/torch_load_dispatch.h,
// StatusCode::kAmbiguous; a sharded index's tensor the loader takes from another shard than
// weight_map names): refused, since the gate must read what the loader reads.
constexpr const char* kReadingAmbiguous = "reading_ambiguous";
// (warning) a chunk its file holds that the manifest (a sharded index's weight_map) does not place there.
constexpr const char* kChunkNotInManifest = "chunk_not_in_manifest";
}  // namespace verify_code

std::string chunk_sha256_mismatch_message(uint64_t offset, const std::string& label,
                                          const std::string& expected, const std::string& got);

// The code for a failed TensorFile::check_container(): a member's CRC-32, or its local header.
const char* container_issue_code(const Status& status);

// The chunks of `file` (by index) whose payload starts in a member check_container found damaged
// (TensorFile::damaged_ranges): the tensors a container finding is about.
std::vector<size_t> chunks_in_damaged_members(const TensorFile& file);
// A container finding's tensor field and message for the tensors it damages: "a, b and 3 more", and
// "<message>; it holds tensors a, b and 3 more" (the message alone when `tensors` is empty).
std::string damaged_tensor_list(const std::vector<std::string>& tensors);
std::string container_finding_message(const std::string& message, const std::vector<std::string>& tensors);

}  // namespace ckpt
