#include "verifier/drill/program_contract.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

namespace ckpt {

std::vector<std::string> contract_environment(const ProgramRun& run) {
  std::vector<std::string> env = {
      std::string(kEnvCkptDir) + "=" + run.ckpt_dir, std::string(kEnvSteps) + "=" + std::to_string(run.steps),
      std::string(kEnvSaveEvery) + "=" + std::to_string(run.save_every),
      std::string(kEnvMetrics) + "=" + run.metrics, std::string(kEnvRole) + "=" + run.role};
  if (!run.resume.empty()) env.push_back(std::string(kEnvResume) + "=" + run.resume);
  return env;
}

std::vector<std::string> substitute_placeholders(const std::vector<std::string>& args,
                                                 const ProgramRun& run) {
  const std::pair<const char*, std::string> values[] = {{"{ckpt_dir}", run.ckpt_dir},
                                                        {"{steps}", std::to_string(run.steps)},
                                                        {"{save_every}", std::to_string(run.save_every)},
                                                        {"{metrics}", run.metrics},
                                                        {"{resume}", run.resume}};
  std::vector<std::string> out;
  for (std::string a : args) {
    for (const auto& [key, value] : values) {
      for (size_t at = a.find(key); at != std::string::npos; at = a.find(key, at + value.size()))
        a.replace(at, std::string(key).size(), value);
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {

Result<int64_t> integer_variable(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return Status::invalid_argument(std::string(name) + " is not set");
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0)
    return Status::invalid_argument(std::string(name) + "=" + text + ": expected a non-negative integer");
  return static_cast<int64_t>(value);
}

Result<std::string> string_variable(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return Status::invalid_argument(std::string(name) + " is not set");
  return std::string(text);
}

std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return nlohmann::json(value).dump();
}

}  // namespace

Result<std::optional<ProgramRun>> program_run_from_environment() {
  if (std::getenv(kEnvCkptDir) == nullptr) return std::optional<ProgramRun>();
  ProgramRun run;
  CKPT_ASSIGN_OR_RETURN(run.ckpt_dir, string_variable(kEnvCkptDir));
  CKPT_ASSIGN_OR_RETURN(run.steps, integer_variable(kEnvSteps));
  CKPT_ASSIGN_OR_RETURN(run.save_every, integer_variable(kEnvSaveEvery));
  CKPT_ASSIGN_OR_RETURN(run.metrics, string_variable(kEnvMetrics));
  if (const char* resume = std::getenv(kEnvResume)) run.resume = resume;
  if (const char* role = std::getenv(kEnvRole)) run.role = role;
  return std::optional<ProgramRun>(std::move(run));
}

std::string metrics_line(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string line = "{\"step\": " + std::to_string(step);
  for (const auto& [name, value] : values)
    line += ", " + nlohmann::json(name).dump() + ": " + number_text(value);
  return line + "}";
}

std::string checkpoint_event_line(int64_t step, const std::string& path) {
  return nlohmann::json{{"event", "checkpoint"}, {"step", step}, {"path", path}}.dump();
}

}  // namespace ckpt
