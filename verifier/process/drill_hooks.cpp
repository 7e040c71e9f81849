#include "verifier/process/drill_hooks.h"

#include <unistd.h>

#include <cstdio>

namespace ckpt {

bool parse_hold_point(const std::string& name, HoldPoint* out) {
  if (name.empty() || name == "none")
    *out = HoldPoint::kNone;
  else if (name == "after-save")
    *out = HoldPoint::kAfterSave;
  else if (name == "during-save")
    *out = HoldPoint::kDuringSave;
  else if (name == "during-prune")
    *out = HoldPoint::kDuringPrune;
  else
    return false;
  return true;
}

void announce_event(const std::string& kind, const std::string& detail) {
  std::fprintf(stdout, "%s%s %s\n", kEventPrefix, kind.c_str(), detail.c_str());
  std::fflush(stdout);
}

void hold_for_kill(const std::string& kind, const std::string& detail) {
  announce_event(kind, detail);
  for (;;) ::pause();
}

}  // namespace ckpt
