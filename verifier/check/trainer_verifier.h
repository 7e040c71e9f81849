// `verify` of an HF Trainer, Accelerate or DeepSpeed folder as one checkpoint (layouts/trainer_layout.h),
// judged by what its trainer loads on resume:
//  - every file is checked as a tensor file; its pickles are gated for the loader that reads them
//    (an RNG file's numpy state is accepted in numpy's own shape only, DeepSpeed's loss scaler and
//    ZeRO stage enum as records of plain fields);
//  - a file the trainer never loads on resume (HF's training_args.bin) is a warning naming its
//    code-running globals, not a failure of the folder (verified alone it still fails);
//  - the files a resume needs, in the trainer's words (a Trainer folder without optimizer.pt is what
//    save_only_model=True writes: the optimizer and scheduler would start afresh), unless
//    --weights-only;
//  - the step agrees across trainer_state.json, the scheduler, the optimizer, DeepSpeed's
//    global_steps and the folder's name;
//  - ZeRO-3 model states whose parameters are empty placeholders are said to hold no weights.
//
// Error and warning codes (stable):
//   file_not_loaded_on_resume  (warning) a file of the folder its trainer never loads on resume names
//                              globals torch.load(weights_only=True) refuses
//   zero_placeholders_only     a DeepSpeed ZeRO-3 model-states file verified alone: its parameters are
//                              empty placeholders, the weights live in the optimizer states
//   zero_partition_mismatch    the ranks' flat fp32 partitions do not hold every parameter element once
//                              (stage 1/2), or ceil(numel / world) of each per rank (stage 3)
#pragma once

#include <string>

#include "formats/tensor_file.h"
#include "layouts/trainer_layout.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

namespace verify_code {
constexpr const char* kFileNotLoadedOnResume = "file_not_loaded_on_resume";
constexpr const char* kZeroPlaceholdersOnly = "zero_placeholders_only";
constexpr const char* kZeroPartitionMismatch = "zero_partition_mismatch";
}  // namespace verify_code

VerifyReport verify_trainer_folder(const TrainerLayout& layout, const VerifyOptions& options);

// A single file's training state agrees with itself (issue 65): its top-level `global_step` / `step`
// (also VerifyReport::step, set whether or not `judge`) against its optimizer's per-parameter step (never
// more) and its scheduler's last_epoch (equal, or equal to its `epoch` for a per-epoch scheduler; a
// disagreement the optimizer's step confirms is an error, one it cannot settle a warning).
void check_state_steps(const TensorFile& file, VerifyReport& report, bool judge = true);

// Whether `file` is a DeepSpeed ZeRO-3 model-states file whose parameters are all empty
// placeholders (param_shapes lists them; `module` holds zero-element tensors): `why` says so.
bool is_zero3_placeholder_states(const TensorFile& file, std::string* why);

}  // namespace ckpt
