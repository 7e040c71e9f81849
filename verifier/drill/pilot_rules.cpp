#include "verifier/drill/pilot_rules.h"

namespace ckpt {
namespace {

// The config has one optimizer (AdamW); a config that names another would carry optimizer.name.
std::string optimizer_kind(const PilotConfig& c) {
  const nlohmann::json resolved = c.resolved();
  const auto& o = resolved.contains("optimizer") ? resolved["optimizer"] : nlohmann::json::object();
  return o.contains("name") && o["name"].is_string() ? o["name"].get<std::string>() : "adamw";
}

}  // namespace

std::vector<PilotRuleViolation> pilot_rule_violations(const PilotConfig& pilot, const PilotConfig& long_run) {
  std::vector<PilotRuleViolation> v;
  if (!pilot.save_optimizer_state)
    v.push_back({"save_optimizer_state",
                 "pilot drops optimizer state (false); its checkpoints and memory omit "
                 "the optimizer moments"});
  if (pilot.seq_len < long_run.seq_len)
    v.push_back({"seq_len", "pilot " + std::to_string(pilot.seq_len) + " < long run " +
                                std::to_string(long_run.seq_len)});
  if (pilot.micro_batch < long_run.micro_batch)
    v.push_back({"micro_batch", "pilot " + std::to_string(pilot.micro_batch) + " < long run " +
                                    std::to_string(long_run.micro_batch)});
  const std::string a = optimizer_kind(pilot), b = optimizer_kind(long_run);
  if (a != b) v.push_back({"optimizer", "pilot " + a + " != long run " + b});
  return v;
}

Status check_pilot_rules(const PilotConfig& pilot, const PilotConfig& long_run) {
  const auto violations = pilot_rule_violations(pilot, long_run);
  if (violations.empty()) return Status::ok();
  std::string m = pilot.source_path + ": not a faithful pilot for " + long_run.source_path +
                  " (it would hide the memory it is meant to measure):";
  for (size_t i = 0; i < violations.size(); ++i)
    m += (i ? "; " : " ") + violations[i].key + ": " + violations[i].detail;
  return Status::invalid_argument(m);
}

}  // namespace ckpt
