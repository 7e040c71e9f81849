// The folders the big trainers write, each read as ONE checkpoint with its trainer's own resume
// contract (issue 64). A layout detects itself from evidence (the files only that trainer writes),
// names every file's role and whether the trainer loads it on resume, and is found where the
// trainer's own resume finds it: from the run directory above (HF's get_last_checkpoint takes the
// highest checkpoint-N; DeepSpeed's `latest` names the tag folder).
//
//   hf_trainer  checkpoint-N/: model.safetensors | pytorch_model.bin (sharded with an index or not) |
//               adapter_model.* (PEFT), optimizer.pt, scheduler.pt, scaler.pt, rng_state[_<r>].pth,
//               trainer_state.json (the step), training_args.bin (never loaded on resume)
//               (transformers trainer.py _save_checkpoint, _load_from_checkpoint, _load_rng_state,
//               _load_optimizer_and_scheduler)
//   accelerate  save_state(): model*.safetensors | pytorch_model*.bin, optimizer*.bin, scheduler*.bin,
//               sampler*.bin, scaler.pt, random_states_<r>.pkl, custom_checkpoint_<i>.pkl
//               (accelerate checkpointing.py save_accelerator_state / load_accelerator_state)
//   deepspeed   `latest` naming global_stepN/: mp_rank_XX_model_states.pt (ZeRO 0-2) or
//               zero_pp_rank_R_mp_rank_XX_model_states.pt (ZeRO-3), [bf16_]zero_pp_rank_R_mp_rank_XX_
//               optim_states.pt (deepspeed runtime/engine.py _save_checkpoint, load_checkpoint)
// Under an engine, the Trainer's and save_state's folders hold its files too, and stay theirs:
// DeepSpeed's `latest` naming the tag folder (global_stepN/ or pytorch_model/) whose files its
// load_checkpoint reads (loader kDeepSpeedLoader, names "global_step10/..."), and FSDP's
// pytorch_model_fsdp*.bin / optimizer*.bin files or its SHARDED_STATE_DICT DCP folders
// pytorch_model_fsdp_<i>/ and optimizer_<i>/ (loader kDcpLoader, the folder as the file).
// Evidence of two layouts in one folder is refused (kAmbiguous): which trainer wrote it decides
// what a resume reads, and guessing would check the wrong contract.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "layouts/layout.h"

namespace ckpt {

enum class TrainerLayoutKind { kHfTrainer, kAccelerate, kDeepSpeed };

// LayoutFile::loader of the files an engine under the trainer reads: DeepSpeed's load_checkpoint
// (torch.load(weights_only=False) of its own pickles, judged by the DeepSpeed profile), and a DCP
// folder (FSDP's SHARDED_STATE_DICT; LayoutFile::name is then the folder).
constexpr const char* kDeepSpeedLoader = "deepspeed.load_checkpoint";
constexpr const char* kDcpLoader = "torch.distributed.checkpoint";
// The largest trainer_state.json / config.json a reader takes (a long run's log history is a few MiB).
constexpr uint64_t kMaxTrainerJsonBytes = 64 << 20;
const char* trainer_layout_name(TrainerLayoutKind kind);  // "hf_trainer", "accelerate", "deepspeed"

struct TrainerLayout {
  TrainerLayoutKind kind = TrainerLayoutKind::kHfTrainer;
  std::string dir;       // the checkpoint folder (DeepSpeed: the tag folder `latest` names)
  std::string given;     // the path the user passed, when the layout was found from above it
  std::string evidence;  // "trainer_state.json", "random_states_0.pkl", "latest -> global_step10", ...
  std::vector<LayoutFile> files;
  // Found from the run folder, but the newest checkpoint folder a resume takes is not this
  // trainer's checkpoint (empty, half copied): what a resume from the run folder would hit.
  Status defect;
  const LayoutFile* find(FileRole role) const;
  std::vector<const LayoutFile*> all(FileRole role) const;
  // A Trainer's or save_state's folder holding DeepSpeed's `latest` and tag folder: the model and
  // optimizer a resume reads are DeepSpeed's.
  bool under_deepspeed() const;
};

// The trainer layout at `path` (the checkpoint folder, or the run directory above it), nullopt when
// none; kAmbiguous when the folder shows two trainers' evidence; kNotFound when `latest` names a
// folder that is missing.
Result<std::optional<TrainerLayout>> detect_trainer_layout(const std::string& path);

// The checkpoint number in HF's `checkpoint-N`, Accelerate's `checkpoint_N` or DeepSpeed's
// `global_stepN` folder name; -1 for another name.
long long layout_step_from_dir_name(const std::string& name);

// detect_trainer_layout as the layouts registry sees it (layouts/layout.h): `kind`'s claim on `path`,
// or nullopt. Where the folder holds two trainers' evidence, each of them claims it (so the registry
// refuses the path naming both); a DeepSpeed `latest` naming a missing folder is DeepSpeed's claim
// with that defect. A folder with ckptcheck's manifest.json or named like its step folders is
// ckptcheck's own (layouts/native_checkpoint_layout.cpp), never a trainer's.
std::optional<LayoutMatch> trainer_layout_match(const std::string& path, TrainerLayoutKind kind);

// The trainer layout a registry match describes (`match.kind` one of the three trainers'): what
// verify and TensorSource read, taken from the one detection the registry made rather than a second.
TrainerLayout trainer_layout_of(const LayoutMatch& match);

// The three trainers' registered layouts share everything but their words: detection by
// trainer_layout_match, and a seal of the checkpoint folder itself, also when it was found from the
// run directory above. A seal of the run directory would cover every checkpoint-N beside it, and
// break at the trainer's next save or rotation; a seal is written after one save, of that save.
class TrainerFolderLayout : public Layout {
 public:
  explicit TrainerFolderLayout(TrainerLayoutKind kind) : kind_(kind) {}
  const char* name() const override { return trainer_layout_name(kind_); }
  std::string seal_subject(const LayoutMatch& match) const override { return match.dir; }
  std::optional<LayoutMatch> detect(const std::string& path) const override {
    return trainer_layout_match(path, kind_);
  }

 private:
  TrainerLayoutKind kind_;
};

}  // namespace ckpt
