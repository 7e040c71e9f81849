// `ckptcheck seal PATH`: a hashed manifest written beside a checkpoint this tool did not write (a
// DCP directory, a torch.save file, a Hugging Face Trainer folder), so that `verify` can later name
// the file, tensor and byte range that changed. Seal after each save, verify before each resume.
//
// What a seal holds, for every regular file under the directory (or for the one file sealed):
// its size and SHA-256 (the `sha256sum` of the file) and, where one of our readers can open it,
// every tensor's name, dtype, shape, byte range in the file and the SHA-256 of that range. In a DCP
// directory each storage item of a `.distcp` file (a tensor chunk or a bytes entry) is one range. Verify
// hashes each file once; only a file whose hash differs is examined range by range, straight from
// the recorded offsets, so a file whose header the damage made unreadable is still localised. A
// large file's pieces are hashed in parallel; matching pieces prove the file without a second,
// single-threaded pass over it.
//
// Where it lives: `DIR/ckptcheck.seal.json` for a directory, `FILE.ckptcheck.seal.json` for one
// file. It carries its own digest ("seal_sha256", base/embedded_digest.h) and can be signed with
// `ckptcheck sign` (a detached `<seal>.sig`, verifier/check/signature.h). An existing seal is never
// replaced: a seal written over a damaged checkpoint would bless the damage.
//
// Megatron-Core's `integrity.json` ({"algorithm": "sha256", "files": {"<relative path>": "<hex>"}})
// is written on request and checked whenever present, so sealed checkpoints interoperate.
//
// Error codes added to verify_report (stable, like checkpoint_verifier.h's):
//   seal_invalid            the seal does not parse, breaks the schema, or names an unsafe path
//   seal_digest_mismatch    its seal_sha256 differs from its content (edited after sealing)
//   seal_file_missing       a sealed file is gone (or is no longer a regular file)
//   seal_file_size_mismatch a sealed file's size changed
//   seal_file_sha256_mismatch a sealed file's bytes changed; the tensor errors below say where
//   seal_tensor_sha256_mismatch a tensor's byte range no longer hashes to its seal
//   integrity_sha256_mismatch a file differs from integrity.json (or is missing)
// Warnings: seal_unlisted_file (a file the seal does not list; seals and signatures excepted),
// seal_file_renamed (a single file sealed under another name, renamed with its seal, bytes intact).
// A single file's seal is checked against the file it is found beside, never the name inside it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/hashing_file_tail.h"
#include "base/status.h"
#include "distributed/byte_collective.h"
#include "layouts/seal_files.h"  // kSealFileName, kSealFileSuffix, kIntegrityFileName
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

constexpr const char* kSealDigestField = "seal_sha256";

namespace verify_code {
constexpr const char* kSealInvalid = "seal_invalid";
constexpr const char* kSealDigestMismatch = "seal_digest_mismatch";
constexpr const char* kSealFileMissing = "seal_file_missing";
constexpr const char* kSealFileSizeMismatch = "seal_file_size_mismatch";
constexpr const char* kSealFileSha256Mismatch = "seal_file_sha256_mismatch";
constexpr const char* kSealTensorSha256Mismatch = "seal_tensor_sha256_mismatch";
constexpr const char* kIntegritySha256Mismatch = "integrity_sha256_mismatch";
constexpr const char* kSealUnlistedFile = "seal_unlisted_file";
constexpr const char* kSealFileRenamed = "seal_file_renamed";
}  // namespace verify_code

// One tensor's payload as a plain byte range of its file.
struct SealedTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::string sha256;
};

struct SealedFile {
  std::string path;    // relative to the sealed directory; the file's own name for a sealed file
  std::string format;  // the tensor format our reader recognised; empty for other files
  uint64_t bytes = 0;
  std::string sha256;
  // A file larger than one piece also records the SHA-256 of each consecutive `piece_bytes` piece,
  // so verify hashes it on every core instead of one; absent in seals written before pieces.
  uint64_t piece_bytes = 0;
  std::vector<std::string> pieces;
  std::vector<SealedTensor> tensors;
  std::string tensors_unread;  // why the tensors are not listed, when a reader refused the file
};

// Files larger than one piece are sealed piece by piece too. The piece is sized from the sealed
// bytes so a checkpoint has about kSealTargetPieces of them, between 1 and 64 MiB (a power of two):
// verify --distributed splits pieces among its tasks, and 2,048 pieces keep 64 tasks within a few
// percent of an even share (one 1.1 TB checkpoint: 64 MiB pieces, ~17,000 of them).
constexpr uint64_t kSealMinPieceBytes = 1ull << 20;
constexpr uint64_t kSealMaxPieceBytes = 64ull << 20;
constexpr uint64_t kSealTargetPieces = 2048;
uint64_t seal_piece_bytes(uint64_t total_bytes);

struct Seal {
  std::vector<SealedFile> files;
};

struct SealOptions {
  size_t jobs = 0;               // files hashed in parallel; 0 = one per core
  bool write_integrity = false;  // also write Megatron-Core's integrity.json (directories only)
  uint64_t piece_bytes = 0;      // files larger than this are also sealed by pieces; 0: seal_piece_bytes
  // Called on the calling thread a few times a second: (bytes hashed, bytes total).
  std::function<void(uint64_t, uint64_t)> on_progress;
  // seal --distributed: the tasks that share the files (split_by_size of their sizes); every task
  // gathers every file's seal, rank 0 alone writes the seal file, atomically.
  ByteCollective* distributed = nullptr;
  // Files hashed as they were written (HashingFileTail): their whole, piece and range digests are
  // used instead of reading the files back, for each file that is still the one hashed (device,
  // inode, size, modification time). Whatever they do not cover is hashed from the file.
  std::vector<WrittenFileDigests> written;
};

struct SealSummary {
  std::string seal_path;
  std::string integrity_path;  // empty unless written
  size_t files = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;
  std::vector<std::string> unread;  // "file: why" for files whose tensors a reader refused
};

// Where the seal of `path` (a directory or a file) lives.
std::string seal_path_for(const std::string& path);

// Hashes `path` (a directory: every regular file under it; or one file) and writes its seal
// atomically. kInvalidArgument if a seal already exists or a path inside leaves the directory;
// kIoError when a file cannot be read.
Result<SealSummary> seal_checkpoint(const std::string& path, const SealOptions& options);

// Strict parse of a seal's text: every field typed, paths relative and inside, hashes 64 hex.
Result<Seal> parse_seal(const std::string& text, const std::string& where);
std::string seal_to_json_text(const Seal& seal);

// The bytes of each unit verify hashes for this seal, the sizes verify --distributed splits among
// its tasks: every piece of a file sealed by pieces, else the whole file.
std::vector<uint64_t> sealed_unit_sizes(const Seal& seal);

// Whether `path` carries a seal or an integrity.json that verify_sealed can check.
bool has_seal(const std::string& path);

// Checks `path` against its seal (and integrity.json, where present). Findings go in the report; a
// Status only when the verification cannot run (an unreadable --pubkey). Of the options: `jobs`
// (files and pieces hashed at once), `quick` (the seal's own digest and signature, every file present
// with its sealed size; nothing is hashed), `pubkey_path` (`<seal>.sig` must verify under it) and
// `on_progress`. The checks of the checkpoint's own kind run beside it (verify_path).
Result<VerifyReport> verify_sealed(const std::string& path, const VerifyOptions& options);

}  // namespace ckpt
