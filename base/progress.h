// Progress for long work (drills, big verifies): a single self-overwriting line on stderr when it
// is a terminal, and nothing at all when it is piped or redirected, so logs and --json stay clean.
#pragma once

#include <string>

namespace ckpt {

class Progress {
 public:
  Progress();  // enabled iff stderr is a TTY and CKPTCHECK_NO_PROGRESS is unset
  ~Progress();
  void update(const std::string& phase, long long done, long long total);
  void message(const std::string& phase);
  void finish();  // clears the line
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool dirty_ = false;
};

}  // namespace ckpt
