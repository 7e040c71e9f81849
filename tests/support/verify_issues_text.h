// A verify report's issues as text, one per line, for assertion messages.
#pragma once

#include <string>
#include <vector>

#include "verifier/check/verify_report.h"

namespace ckpt::testing {

inline std::string issues_text(const std::vector<VerifyIssue>& issues) {
  std::string s;
  for (const auto& i : issues) s += "[" + i.code + "] " + i.shard + " " + i.tensor + ": " + i.message + "\n";
  return s;
}

}  // namespace ckpt::testing
