#include "verifier/process/process_clock.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ckpt {

double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  // Field 22 (starttime, clock ticks since boot) follows the parenthesised command name.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) start_ticks = std::stoull(field);
  }
  std::ifstream uptime_file("/proc/uptime");
  double uptime = 0;
  uptime_file >> uptime;
  const double start = static_cast<double>(start_ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return uptime > start ? uptime - start : 0;
}

}  // namespace ckpt
