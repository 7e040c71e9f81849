// What `ckptcheck --version` prints: the version, then the version of every library this build
// links (LibTorch is the one `ckptcheck-train` links; `ckptcheck` itself does not load it).
#pragma once

#include <string>

namespace ckpt {

std::string version_text();

}  // namespace ckpt
