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

void write_failure_json(const std::string& path, int exit_code, const Status& status,
                        const std::string& message) {
  const nlohmann::json j = {
      {"ok", false},
      {"path", path},
      {"exit_code", exit_code},
      {"errors", nlohmann::json::array({{{"code", status_code_name(status.code())}, {"message", message}}})}};
  const std::string out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

int report_failure_json(const char* command, const std::string& path, const Status& status) {
  const int code = report_failure(command, status);
  write_failure_json(path, code, status, status.message());
  return code;
}

}  // namespace ckpt
