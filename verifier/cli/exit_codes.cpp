#include "verifier/cli/exit_codes.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace ckpt {

int exit_code_for(const Status& status) {
  if (status.is_ok()) return kExitOk;
  return is_damage(status) ? kExitCheckFailed : kExitUsage;
}

int report_failure(const char* command, const Status& status) {
  std::fprintf(stderr, "ckptcheck %s: %s\n", command, status.to_string().c_str());
  return exit_code_for(status);
}

int report_failure_json(const char* command, const std::string& path, const Status& status) {
  const int code = report_failure(command, status);
  const nlohmann::json j = {
      {"ok", false},
      {"path", path},
      {"exit_code", code},
      {"errors",
       nlohmann::json::array({{{"code", status_code_name(status.code())}, {"message", status.message()}}})}};
  const std::string out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return code;
}

}  // namespace ckpt
