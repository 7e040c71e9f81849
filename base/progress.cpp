#include "base/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ckpt {

Progress::Progress()
    : enabled_(::isatty(STDERR_FILENO) == 1 && std::getenv("CKPTCHECK_NO_PROGRESS") == nullptr) {}

Progress::~Progress() {
  finish();
}

void Progress::update(const std::string& phase, long long done, long long total) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K[%s] %lld/%lld", phase.c_str(), done, total);
  std::fflush(stderr);
  dirty_ = true;
}

void Progress::message(const std::string& phase) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K[%s]", phase.c_str());
  std::fflush(stderr);
  dirty_ = true;
}

void Progress::finish() {
  if (!enabled_ || !dirty_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  dirty_ = false;
}

}  // namespace ckpt
