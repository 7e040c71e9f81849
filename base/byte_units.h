// The binary units that reports print sizes in (1 MiB = 2^20 bytes), as doubles so that
// `bytes / kBytesPerMiB` never truncates, and the one way a size is written for people.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ckpt {

inline constexpr double kBytesPerKiB = 1024.0;
inline constexpr double kBytesPerMiB = 1024.0 * kBytesPerKiB;
inline constexpr double kBytesPerGiB = 1024.0 * kBytesPerMiB;

// "512 B", "3.91 KiB", "12.30 MiB", "2.00 GiB".
inline std::string byte_size_text(double bytes) {
  char buf[48];
  if (bytes >= kBytesPerGiB)
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / kBytesPerGiB);
  else if (bytes >= kBytesPerMiB)
    std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / kBytesPerMiB);
  else if (bytes >= kBytesPerKiB)
    std::snprintf(buf, sizeof(buf), "%.2f KiB", bytes / kBytesPerKiB);
  else
    std::snprintf(buf, sizeof(buf), "%.0f B", bytes);
  return buf;
}

}  // namespace ckpt
