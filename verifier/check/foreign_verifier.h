// `verify` of checkpoints this tool did not write and no seal covers: a PyTorch DCP directory, a
// single torch.save (or safetensors, ...) file, a Hugging Face Trainer `checkpoint-N/` folder. No
// hashes were recorded, so the checks are the ones the bytes and conventions allow:
//  - DCP: every storage item lies inside its file, items do not overlap, no file holds bytes no
//    item accounts for, each tensor's chunks cover its global shape exactly once
//    (verifier/check/chunk_coverage.h), every item parses as a torch.save archive holding what
//    `.metadata` says;
//  - every zip member's CRC-32 (torch.load never checks it); NaN/Inf counts of floating tensors;
//  - resumability (skipped with `weights_only`): resume state is recognised by its structure
//    wherever it sits (verifier/check/resume_state.h: an optimizer state dict is `state` +
//    `param_groups` under any key) and listed in the report; then DCP: optimizer state (or a key
//    starting with "optim"); Lightning `.ckpt`: non-empty `optimizer_states` and `lr_schedulers`;
//    another torch.save file: optimizer state (or an `optimizer*`, `state` or `param_groups` key);
//    HF Trainer folder: `optimizer.pt`, `scheduler.pt`, `rng_state*.pth`, `trainer_state.json`, or
//    the same state found in any of its files (`scaler.pt` exists only for fp16 runs, so it is
//    checked when present and never required). The advice suggests --weights-only only when the
//    checkpoint holds no resume state at all.
// Error codes (added to checkpoint_verifier.h's list): dcp_metadata_invalid, item_outside_file,
// item_overlap, item_missing, item_unreadable, unreferenced_bytes, zip_crc_mismatch,
// zip_header_mismatch (formats/zip_archive.h check_local_headers: a byte outside every member's
// data that no CRC-32 covers, such as PyTorch's 'Z' padding, changed); and the
// existing shard_missing, shard_path_unsafe, shard_unreadable, shard_truncated, coverage_*,
// chunk_out_of_bounds, nonfinite_values, optimizer/scheduler/rng/step_state_missing.
//  - Megatron-Core torch_dist directories (DCP plus metadata.json and common.pt): the DCP checks,
//    metadata.json is torch_dist v1 with torch common state and no key Megatron would refuse
//    (megatron_config_invalid), common.pt exists (megatron_common_missing) and reads as a torch.save
//    file (megatron_common_unreadable) whose CRC-32s and NaN/Inf counts are checked like any file's;
//    resumability: optimizer state (DCP "optim*" keys or common.pt "optimizer"), common.pt
//    "opt_param_scheduler" and "iteration".
// Warning: dataset_unsupported (a dataset of a generic HDF5 file the reader lists but cannot read:
// compressed, sparse, a string type, ...; named with its type, shape and why).
// Warning: not_sealed (added by verify_path when no seal covers the checkpoint: no hashes were recorded, so a
// flipped byte outside a zip member's CRC, or in a safetensors payload, goes unseen; `ckptcheck seal PATH`
// after each save fixes that).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/pickle_trust_profile.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

namespace verify_code {
constexpr const char* kNotSealed = "not_sealed";
constexpr const char* kDatasetUnsupported = "dataset_unsupported";  // a warning
constexpr const char* kMegatronConfigInvalid = "megatron_config_invalid";
constexpr const char* kMegatronCommonMissing = "megatron_common_missing";
constexpr const char* kMegatronCommonUnreadable = "megatron_common_unreadable";
// An HDF5 model whose model_config or training_config names code keras.models.load_model would run
// (a Lambda layer's marshalled bytecode, a function or module reference; formats/keras_config.h).
constexpr const char* kKerasCodeRefused = "keras_code_refused";
}  // namespace verify_code

// Each honours every option of VerifyOptions but current_pins (foreign checkpoints carry no pins;
// verifier/check/checkpoint_kind.h refuses it) and pubkey_path (a signature covers a seal, checked
// by verify_sealed). `quick` skips what needs the payload bytes (CRC-32s, NaN/Inf counts); `jobs`
// reads tensors in parallel, and the report is the same for any number of jobs.
VerifyReport verify_dcp_dir(const std::string& dir, const VerifyOptions& options);
VerifyReport verify_foreign_file(const std::string& path, const VerifyOptions& options);
VerifyReport verify_foreign_dir(const std::string& dir, const VerifyOptions& options);
// A sharded model's *.safetensors.index.json: every file it names exists and holds the tensors
// weight_map puts there (shard_missing, chunk_missing_in_shard), and each is checked as a
// safetensors file.
VerifyReport verify_safetensors_index(const std::string& index_path, const VerifyOptions& options);

// The checks of one opened tensor file: its pickle globals for `loader` (the gate; a TorchScript
// archive is read by torch.jit.load's unpickler, and refused under --weights-only), Keras code in its
// configs, then unless --quick its container's CRC-32s and every chunk's NaN/Inf counts.
void check_tensor_file(const TensorFile& file, const std::string& shard, const VerifyOptions& options,
                       VerifyReport& report, PickleLoader loader = PickleLoader::kTorchLoad);
// The error code for a file that cannot be opened: reading_ambiguous, shard_truncated, shard_unreadable.
const char* unreadable_verify_code(const Status& status);

// The pickle gate over every torch.save file (zip or legacy, told apart by their first bytes) below
// `dir`, `min_depth` levels down or deeper (1: the top level too; 2: subdirectories only), up to 16:
// a folder's nested `global_step*/` or a sealed directory of files whose kind is otherwise unknown
// still cannot hold a code-running pickle that verify passes. `checked`: files and folders (relative
// to `dir`) a layout already judged with their own loader, skipped here.
void check_pickles_under(const std::string& dir, int min_depth, const VerifyOptions& options,
                         VerifyReport& report, const std::vector<std::string>& checked = {});

}  // namespace ckpt
