// DeepSpeed's checkpoint: `latest` naming global_stepN/, or the tag folder itself: layouts/trainer_layout.h
// detects it and lists its files; this file registers it.
#include "layouts/layout_registry.h"
#include "layouts/trainer_layout.h"

namespace ckpt {

namespace {

class DeepSpeedLayout final : public TrainerFolderLayout {
 public:
  DeepSpeedLayout() : TrainerFolderLayout(TrainerLayoutKind::kDeepSpeed) {}
  const char* evidence_rule() const override {
    return "`latest` naming a folder of *_model_states.pt (a Trainer's folder beside it is the Trainer's), "
           "or *_model_states.pt in the folder. Excludes ckptcheck's roots (their `latest` names a step_* "
           "folder)";
  }
  const char* resume_rule() const override {
    return "load_checkpoint reads the tag `latest` names: every rank's model states and ZeRO optimizer "
           "states";
  }
  const char* seal_ranges() const override { return "the tag folder's files whole and each tensor's range"; }
};

}  // namespace

const Layout& deepspeed_layout() {
  static const DeepSpeedLayout layout;
  return layout;
}

}  // namespace ckpt
