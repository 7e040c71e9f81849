// The binary units that reports print sizes in (1 MiB = 2^20 bytes), as doubles so that
// `bytes / kBytesPerMiB` never truncates.
#pragma once

namespace ckpt {

inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;
inline constexpr double kBytesPerGiB = 1024.0 * kBytesPerMiB;

}  // namespace ckpt
