// What makes a pilot a faithful stand-in for the long run it is meant to size. A pilot that drops
// the optimizer state, uses shorter sequences or smaller micro-batches, or another optimizer,
// measures a smaller memory peak and a smaller checkpoint than the long run will have: it hides
// exactly the problem it exists to find. Such a pilot is refused, naming every key that differs.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "fixtures/pilot_config.h"

namespace ckpt {

struct PilotRuleViolation {
  std::string key;     // "seq_len"
  std::string detail;  // "pilot 64 < long run 256"
};

std::vector<PilotRuleViolation> pilot_rule_violations(const PilotConfig& pilot, const PilotConfig& long_run);

// kInvalidArgument naming the two files and each violation, or ok.
Status check_pilot_rules(const PilotConfig& pilot, const PilotConfig& long_run);

}  // namespace ckpt
