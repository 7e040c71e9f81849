#include "verifier/cli/option_flags.h"

namespace ckpt {

std::string with_flags(const std::string& message, const FieldFlags& flags) {
  std::string out;
  size_t from = 0;
  for (;;) {
    const size_t open = message.find('`', from);
    const size_t close = open == std::string::npos ? std::string::npos : message.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string name = message.substr(open + 1, close - open - 1);
    out.append(message, from, open - from);
    const std::string* flag = nullptr;
    for (const auto& [field, spelled] : flags)
      if (field == name) flag = &spelled;
    if (flag) {
      out += *flag;
    } else {
      out.append(message, open, close + 1 - open);  // backquotes in pairs: the whole span as it is
    }
    from = close + 1;
  }
  out.append(message, from, std::string::npos);
  return out;
}

}  // namespace ckpt
