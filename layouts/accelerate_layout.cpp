// Accelerate's save_state folder: layouts/trainer_layout.h detects it and lists its files; this file
// registers it.
#include "layouts/layout_registry.h"
#include "layouts/trainer_layout.h"

namespace ckpt {

namespace {

class AccelerateLayout final : public TrainerFolderLayout {
 public:
  AccelerateLayout() : TrainerFolderLayout(TrainerLayoutKind::kAccelerate) {}
  const char* evidence_rule() const override {
    return "random_states_<r>.pkl, custom_checkpoint_<i>.pkl, optimizer*.bin or scheduler*.bin, and no "
           "trainer_state.json. Excludes ckptcheck's step folders";
  }
  const char* resume_rule() const override {
    return "load_state loads model*, optimizer*.bin, scheduler*.bin, sampler*.bin, scaler.pt, "
           "random_states_<r>.pkl and custom_checkpoint_<i>.pkl";
  }
  const char* seal_ranges() const override { return "the folder's files whole and each tensor's range"; }
};

}  // namespace

const Layout& accelerate_layout() {
  static const AccelerateLayout layout;
  return layout;
}

}  // namespace ckpt
