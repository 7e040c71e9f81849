// HF Trainer's checkpoint-N/ (or the run folder above: the highest N): layouts/trainer_layout.h detects it
// and lists its files; this file registers it.
#include "layouts/layout_registry.h"
#include "layouts/trainer_layout.h"

namespace ckpt {

namespace {

class HfTrainerLayout final : public TrainerFolderLayout {
 public:
  HfTrainerLayout() : TrainerFolderLayout(TrainerLayoutKind::kHfTrainer) {}
  const char* evidence_rule() const override {
    return "trainer_state.json in the folder (Accelerate's or DeepSpeed's evidence beside it: refused as "
           "two). Excludes ckptcheck's step folders";
  }
  const char* resume_rule() const override {
    return "Trainer(resume_from_checkpoint) loads the weights, optimizer.pt, scheduler.pt, scaler.pt, "
           "rng_state*.pth and trainer_state.json; never training_args.bin. Under DeepSpeed the model and "
           "optimizer from the tag `latest` names; under FSDP pytorch_model_fsdp* and optimizer_<i>/";
  }
  const char* seal_ranges() const override {
    return "checkpoint-N's files whole and each tensor's range (from the run folder too: the checkpoint it "
           "resumes)";
  }
};

}  // namespace

const Layout& hf_trainer_layout() {
  static const HfTrainerLayout layout;
  return layout;
}

}  // namespace ckpt
