#include "formats/megatron_dist_checkpoint.h"

#include "base/file_io.h"
#include "base/json_fields.h"
#include "formats/dcp_checkpoint.h"
#include "formats/pytorch_file.h"

namespace ckpt {

namespace {

struct ConfigField {
  const char* key;
  bool required;
  const char* expected_string;  // null: an integer field
  int64_t expected_int;
};

// CheckpointingConfig's fields, in order, and the only values this reader understands.
constexpr ConfigField kConfigFields[] = {
    {"sharded_backend", true, "torch_dist", 0},
    {"sharded_backend_version", false, nullptr, 1},
    {"common_backend", false, "torch", 0},
    {"common_backend_version", false, nullptr, 1},
};

std::string shown(const nlohmann::json& v) {
  const std::string s = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 64) + "..." : s;
}

}  // namespace

std::vector<std::string> check_megatron_config(const nlohmann::json& config, const std::string& where) {
  std::vector<std::string> problems;
  if (!config.is_object()) {
    problems.push_back(where + ": expected a JSON object (Megatron's CheckpointingConfig), found " +
                       config.type_name());
    return problems;
  }
  for (const ConfigField& f : kConfigFields) {
    auto it = config.find(f.key);
    if (it == config.end()) {
      if (f.required) problems.push_back(where + ": no '" + f.key + "' (Megatron requires it)");
      continue;
    }
    if (f.expected_string) {
      if (!it->is_string() || it->get<std::string>() != f.expected_string) {
        problems.push_back(where + ": '" + f.key + "' is " + shown(*it) + ", expected \"" +
                           f.expected_string +
                           "\" (only torch_dist directories with torch common state are read)");
      }
    } else if (!it->is_number_integer() || it->get<int64_t>() != f.expected_int) {
      problems.push_back(where + ": '" + f.key + "' is " + shown(*it) + ", expected " +
                         std::to_string(f.expected_int) + " (the only version this reader knows)");
    }
  }
  for (auto it = config.begin(); it != config.end(); ++it) {
    bool known = false;
    for (const ConfigField& f : kConfigFields) known = known || it.key() == f.key;
    if (!known) {
      problems.push_back(where + ": unknown key '" + it.key().substr(0, 64) +
                         "' (Megatron's CheckpointingConfig(**config) would refuse it)");
    }
  }
  return problems;
}

MegatronParts read_megatron_parts(const std::string& dir, bool mcore_metadata) {
  MegatronParts parts;
  const std::string config_path = dir + "/" + kMegatronConfigFileName;
  const std::string common_path = dir + "/" + kMegatronCommonFileName;
  parts.has_config = path_exists(config_path);
  parts.has_common = path_exists(common_path);
  parts.present = mcore_metadata || parts.has_config;
  if (!parts.present) return parts;

  if (!parts.has_config) {
    parts.config_problems.push_back(config_path +
                                    ": missing (Megatron writes it with every torch_dist checkpoint)");
  } else if (!is_regular_file(config_path) || !path_resolves_inside(dir, config_path)) {
    parts.config_problems.push_back(config_path + ": not a regular file inside " + dir);
  } else {
    auto config = read_json_file(config_path, kMegatronMaxConfigBytes);
    if (!config.is_ok()) {
      parts.config_problems.push_back(config.status().message());
    } else {
      parts.config = std::move(*config);
      parts.config_problems = check_megatron_config(parts.config, config_path);
    }
  }

  if (!parts.has_common) {
    parts.common_status = Status::not_found(
        common_path + ": missing (Megatron writes the state every rank shares there with every save)");
  } else if (!is_regular_file(common_path) || !path_resolves_inside(dir, common_path)) {
    parts.common_status = Status::invalid_argument(common_path + ": not a regular file inside " + dir);
  } else {
    auto file = open_pytorch_file(common_path);
    if (file.is_ok()) {
      parts.common = std::shared_ptr<const TensorFile>(std::move(*file));
    } else {
      parts.common_status = file.status();
    }
  }
  return parts;
}

}  // namespace ckpt
