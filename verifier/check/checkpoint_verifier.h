// `verify`: every check that can be made on a checkpoint at rest, torch-free, from the bytes on
// disk and the manifest alone.
//
// Error codes (stable strings: scripts and tests match on them; messages may change):
//   manifest_missing         the checkpoint dir has no manifest.json (never committed)
//   manifest_invalid         manifest.json does not parse, breaks the schema, has an unknown
//                            version or lists a shard path / tensor name twice
//   manifest_digest_mismatch manifest.json's manifest_sha256 differs from the hash of its content
//   shard_missing            a shard the manifest lists does not exist
//   shard_path_unsafe        a shard path is absolute, has "..", or is a symlink leaving the dir
//   shard_not_regular        a shard path names a directory, FIFO, device...
//   shard_size_mismatch      file size differs from the manifest's `bytes`
//   shard_sha256_mismatch    the shard digest differs from the manifest's `sha256` (whole file, or for
//                            native shards preamble + header), or padding is not zero
//   shard_unreadable         the shard's reader rejects its header (the reader's message)
//   shard_truncated          the reader says the file stops before its header says it ends
//   chunk_sha256_mismatch    a chunk's payload does not hash to the manifest's chunk sha256
//   chunk_missing_in_shard   the manifest places a chunk in a shard whose header lacks it
//   chunk_header_mismatch    dtype, global shape, data_offset/data_bytes or sha256 of a chunk
//                            differ between the shard header and the manifest
//   coverage_gap             a tensor's chunks leave elements uncovered
//   coverage_overlap         two chunks of a tensor cover the same element
//   chunk_out_of_bounds      a chunk lies (partly) outside its tensor, or has the wrong rank
//   nonfinite_values         a floating tensor holds NaN or Inf (counts in the message)
//   optimizer_state_missing  a trainable param lacks exp_avg, exp_avg_sq or step
//   optimizer_shape_mismatch an optimizer moment's shape differs from its param's
//   scheduler_state_missing  scheduler.last_step / base_lr / last_lr absent
//   step_state_missing       progress.global_step / skipped_steps absent
//   scaler_state_missing     scaler.scale / growth_factor / backoff_factor / growth_interval /
//                            growth_tracker absent
//   rng_state_missing        no rng.* tensor
//   data_state_missing       data.epoch / cursor / shuffle_seed absent
//   step_disagreement        optimizer step + skipped != global_step, or global_step,
//                            scheduler.last_step and the manifest step differ
//   loss_scale_invalid       scaler.scale is not finite and > 0
//   signature_missing        --pubkey given but manifest.json.sig is absent
//   signature_invalid        the signature file is malformed or does not verify
// Foreign checkpoints (verifier/check/foreign_verifier.h: a DCP dir, an unsealed torch.save or
// other tensor file, a HF Trainer folder); they also use shard_*, coverage_*, chunk_out_of_bounds,
// nonfinite_values and the *_state_missing codes above (a resume's lack, by convention):
//   dcp_metadata_invalid     a DCP .metadata does not parse or is not a DCP Metadata object
//   item_outside_file        a DCP storage item's byte range runs past its file's end (truncated)
//   item_overlap             two DCP storage items share bytes of one file
//   item_missing             a DCP chunk or bytes entry has no storage item
//   item_unreadable          a DCP item is not a torch.save archive, or holds other than .metadata says
//   unreferenced_bytes       bytes of a .distcp file no item accounts for (a gap, trailing garbage)
//   zip_crc_mismatch         a torch.save zip member's CRC-32 differs from its bytes
// Warning codes (never fail a checkpoint):
//   chunk_not_in_manifest    a shard header holds a chunk the manifest does not list
//   unlisted_file            a file in the checkpoint dir that the manifest does not list
//   uncommitted_checkpoint   a temp dir, manifest-less step dir or .deleting-* dir (interrupted prune)
//   manifest_digest_missing  manifest.json has no manifest_sha256 (written before it existed): edits
//                            to fields no shard check covers cannot be detected
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"
#include "formats/dtype.h"
#include "verifier/check/verify_report.h"
#include "verifier/tensors/integrity_codes.h"  // chunk_sha256_mismatch, zip_*: shared with inspect
#include "verifier/tensors/nonfinite_count.h"

namespace ckpt {

namespace verify_code {
constexpr const char* kManifestMissing = "manifest_missing";
constexpr const char* kManifestInvalid = "manifest_invalid";
constexpr const char* kManifestDigestMismatch = "manifest_digest_mismatch";
constexpr const char* kShardMissing = "shard_missing";
constexpr const char* kShardPathUnsafe = "shard_path_unsafe";
constexpr const char* kShardNotRegular = "shard_not_regular";
constexpr const char* kShardSizeMismatch = "shard_size_mismatch";
constexpr const char* kShardSha256Mismatch = "shard_sha256_mismatch";
constexpr const char* kShardUnreadable = "shard_unreadable";
constexpr const char* kShardTruncated = "shard_truncated";
// step_N/ whose manifest is another step's.
constexpr const char* kStepDirMismatch = "step_dir_mismatch";
// (warning) `latest` names a checkpoint older than another committed one in the root.
constexpr const char* kNewerCheckpointExists = "newer_checkpoint_exists";
// reading_ambiguous: verifier/tensors/integrity_codes.h (inspect reports it too).
// A TorchScript archive under --weights-only: torch.load would hand it to torch.jit.load.
constexpr const char* kTorchScriptRefused = "torchscript_refused";
constexpr const char* kChunkMissingInShard = "chunk_missing_in_shard";
constexpr const char* kChunkHeaderMismatch = "chunk_header_mismatch";
constexpr const char* kCoverageGap = "coverage_gap";
constexpr const char* kCoverageOverlap = "coverage_overlap";
constexpr const char* kChunkOutOfBounds = "chunk_out_of_bounds";
constexpr const char* kNonfiniteValues = "nonfinite_values";
constexpr const char* kOptimizerStateMissing = "optimizer_state_missing";
constexpr const char* kOptimizerShapeMismatch = "optimizer_shape_mismatch";
constexpr const char* kSchedulerStateMissing = "scheduler_state_missing";
constexpr const char* kStepStateMissing = "step_state_missing";
constexpr const char* kScalerStateMissing = "scaler_state_missing";
constexpr const char* kRngStateMissing = "rng_state_missing";
constexpr const char* kDataStateMissing = "data_state_missing";
constexpr const char* kStepDisagreement = "step_disagreement";
constexpr const char* kLossScaleInvalid = "loss_scale_invalid";
constexpr const char* kSignatureMissing = "signature_missing";
constexpr const char* kSignatureInvalid = "signature_invalid";
constexpr const char* kDcpMetadataInvalid = "dcp_metadata_invalid";
constexpr const char* kItemOutsideFile = "item_outside_file";
constexpr const char* kItemOverlap = "item_overlap";
constexpr const char* kItemMissing = "item_missing";
constexpr const char* kItemUnreadable = "item_unreadable";
constexpr const char* kUnreferencedBytes = "unreferenced_bytes";
constexpr const char* kPinsDrift = "pins_drift";  // --against-env: config/model/dataset/seeds differ
// warnings
// chunk_not_in_manifest: verifier/tensors/integrity_codes.h (inspect reports it too).
constexpr const char* kUnlistedFile = "unlisted_file";
constexpr const char* kUncommittedCheckpoint = "uncommitted_checkpoint";
constexpr const char* kManifestDigestMissing = "manifest_digest_missing";
constexpr const char* kEnvironmentDrift = "environment_drift";  // --against-env: dependencies/container
}  // namespace verify_code

struct VerifyOptions {
  size_t jobs = 0;            // shards hashed in parallel; 0 = hardware_concurrency
  bool quick = false;         // manifest + header checks only: no data is hashed
  bool weights_only = false;  // foreign checkpoints: model weights alone pass (no resume-state checks)
  std::string pubkey_path;    // when set, the manifest's or the seal's signature must verify under this key
  // --allow-global: pickle globals ("module.name") the user reviewed and accepts beyond the loader's
  // weights-only allowlist (verifier/check/pickle_gate.h).
  std::vector<std::string> allowed_globals;
  // Pins of the current environment for the drift check (wired by `--against-env`; null = skip).
  nlohmann::json current_pins;
  // Called on the calling thread, a few times a second while hashing: (bytes hashed, bytes total).
  std::function<void(uint64_t, uint64_t)> on_progress;
  // verify --distributed: the tasks that share the hashing (null, or a world of one: this process
  // hashes everything). Every task plans the same units, scans its share (split_by_size) and
  // all-gathers the results, so every task builds the same report as a single process would.
  ByteCollective* distributed = nullptr;
  // Distributed: called once with this task's share (units, bytes) before it scans.
  std::function<void(size_t, uint64_t)> on_share;
};

// One scan unit of a distributed verify: bytes [begin, end) of a shard file, and the task that
// scans it. What every task of `verify --distributed` computes alike (for the bench's balance rows
// and the tests that damage one task's share).
struct ShareUnit {
  std::string path;
  uint64_t begin = 0;
  uint64_t end = 0;
  int task = 0;
};

// The units and their tasks for `tasks` tasks of `threads_per_task` scanning threads each (0: this
// machine's cores), as verify --distributed plans them for a ckptcheck checkpoint directory.
Result<std::vector<ShareUnit>> plan_verify_shares(const std::string& checkpoint_dir, size_t tasks,
                                                  size_t threads_per_task);

// nonfinite_values for one tensor with any NaN or Inf: "<n> NaN and <m> Inf of <numel> <dtype> elements".
void add_nonfinite_error(VerifyReport& report, const std::string& shard, const std::string& tensor,
                         DType dtype, const std::vector<int64_t>& shape, const NonfiniteCount& count);

// Verifies one checkpoint directory. Findings go in the report; a Status is returned only when
// the verification itself cannot run (unreadable --pubkey): the CLI maps that to exit 2.
Result<VerifyReport> verify_checkpoint(const std::string& checkpoint_dir, const VerifyOptions& options);

// Verifies what `path` names, tried in this order: a checkpoint dir with manifest.json (also a
// step dir without one: a manifest_missing report); a sealed dir or file (verifier/check/seal.h);
// a DCP dir, a HF Trainer folder or an unsealed tensor file (verifier/check/foreign_verifier.h);
// a root, whose latest committed checkpoint is verified. kNotFound / kIoError when it is none.
Result<VerifyReport> verify_path(const std::string& path, const VerifyOptions& options);

// `--all`: every committed checkpoint of a root, in step order, plus its uncommitted leftovers.
Result<RootVerifyReport> verify_root(const std::string& root, const VerifyOptions& options);

}  // namespace ckpt
