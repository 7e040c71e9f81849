#include "verifier/plan/hardware_catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "base/file_io.h"

namespace ckpt {
namespace {

constexpr uint64_t kMaxCatalogBytes = 1 << 20;

Status bad(const std::string& where, const std::string& key, const std::string& expected) {
  return Status::invalid_argument(where + ": " + key + ": expected " + expected);
}

// yaml-cpp throws on conversions; every read goes through here so nothing escapes the adapter.
Result<double> number(const YAML::Node& map, const char* key, const std::string& where,
                      const std::string& path, bool zero_ok) {
  const std::string name = path.empty() ? key : path + "." + key;
  const YAML::Node node = map[key];
  if (!node) return bad(where, name, "a number, but it is missing");
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    return bad(where, name,
               "a number, got '" + (node.IsScalar() ? node.Scalar() : std::string("non-scalar")) + "'");
  }
  if (!(value > 0 || (zero_ok && value == 0)))
    return bad(where, name, zero_ok ? "a number >= 0" : "a number > 0");
  return value;
}

Result<std::string> text(const YAML::Node& map, const char* key, const std::string& where,
                         const std::string& path, bool required) {
  const YAML::Node node = map[key];
  if (!node) {
    if (required) return bad(where, path + "." + key, "a string, but it is missing");
    return std::string();
  }
  if (!node.IsScalar()) return bad(where, path + "." + key, "a string");
  return node.Scalar();
}

Result<YAML::Node> sequence(const YAML::Node& root, const char* key, const std::string& where) {
  const YAML::Node node = root[key];
  if (!node || !node.IsSequence() || node.size() == 0) return bad(where, key, "a non-empty list");
  return node;
}

// A key the catalog may leave out: 0 then.
Result<double> optional_number(const YAML::Node& map, const char* key, const std::string& where,
                               const std::string& path) {
  if (!map[key]) return 0.0;
  return number(map, key, where, path, true);
}

Result<Accelerator> parse_accelerator(const YAML::Node& node, const std::string& where,
                                      const std::string& path) {
  Accelerator a;
  CKPT_ASSIGN_OR_RETURN(a.name, text(node, "name", where, path, true));
  CKPT_ASSIGN_OR_RETURN(a.memory_bytes, number(node, "memory_bytes", where, path, false));
  CKPT_ASSIGN_OR_RETURN(a.runtime_overhead_bytes, number(node, "runtime_overhead_bytes", where, path, true));
  CKPT_ASSIGN_OR_RETURN(a.relative_speed, number(node, "relative_speed", where, path, false));
  CKPT_ASSIGN_OR_RETURN(a.usd_per_gpu_hour, number(node, "usd_per_gpu_hour", where, path, true));
  CKPT_ASSIGN_OR_RETURN(a.allreduce_bus_bytes_per_second,
                        optional_number(node, "allreduce_bus_bytes_per_second", where, path));
  CKPT_ASSIGN_OR_RETURN(a.note, text(node, "note", where, path, false));
  return a;
}

Result<Reservation> parse_reservation(const YAML::Node& node, const std::string& where,
                                      const std::string& path) {
  Reservation r;
  CKPT_ASSIGN_OR_RETURN(r.name, text(node, "name", where, path, true));
  CKPT_ASSIGN_OR_RETURN(r.hours, number(node, "hours", where, path, false));
  CKPT_ASSIGN_OR_RETURN(double gpus, number(node, "gpus", where, path, false));
  r.gpus = static_cast<int>(gpus);
  CKPT_ASSIGN_OR_RETURN(r.price_multiplier, number(node, "price_multiplier", where, path, false));
  return r;
}

Result<HardwareCatalog> parse_tree(const YAML::Node& root, const std::string& where) {
  if (!root.IsMap()) return Status::invalid_argument(where + ": expected a mapping at the top level");
  HardwareCatalog catalog;
  CKPT_ASSIGN_OR_RETURN(double node_size, number(root, "gpus_per_node", where, "", false));
  catalog.gpus_per_node = static_cast<int>(node_size);
  CKPT_ASSIGN_OR_RETURN(catalog.internode_allreduce_bus_bytes_per_second,
                        optional_number(root, "internode_allreduce_bus_bytes_per_second", where, ""));

  CKPT_ASSIGN_OR_RETURN(YAML::Node accelerators, sequence(root, "accelerators", where));
  for (size_t i = 0; i < accelerators.size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(
        Accelerator a, parse_accelerator(accelerators[i], where, "accelerators[" + std::to_string(i) + "]"));
    catalog.accelerators.push_back(std::move(a));
  }

  const YAML::Node pipeline = root["pipeline"];
  if (!pipeline || !pipeline.IsMap()) return bad(where, "pipeline", "a mapping of *_hours");
  PipelineHours& p = catalog.pipeline;
  CKPT_ASSIGN_OR_RETURN(p.download, number(pipeline, "download_hours", where, "pipeline", true));
  CKPT_ASSIGN_OR_RETURN(p.preprocess, number(pipeline, "preprocess_hours", where, "pipeline", true));
  CKPT_ASSIGN_OR_RETURN(p.validation, number(pipeline, "validation_hours", where, "pipeline", true));
  CKPT_ASSIGN_OR_RETURN(p.export_model, number(pipeline, "export_hours", where, "pipeline", true));
  CKPT_ASSIGN_OR_RETURN(p.copy_out, number(pipeline, "copy_out_hours", where, "pipeline", true));

  CKPT_ASSIGN_OR_RETURN(YAML::Node reservations, sequence(root, "reservations", where));
  for (size_t i = 0; i < reservations.size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(
        Reservation r, parse_reservation(reservations[i], where, "reservations[" + std::to_string(i) + "]"));
    catalog.reservations.push_back(std::move(r));
  }
  std::stable_sort(catalog.reservations.begin(), catalog.reservations.end(),
                   [](const Reservation& a, const Reservation& b) { return a.hours < b.hours; });
  return catalog;
}

}  // namespace

Result<HardwareCatalog> parse_hardware_catalog(const std::string& yaml_text, const std::string& where) {
  try {
    return parse_tree(YAML::Load(yaml_text), where);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(where + ": not valid YAML: " + e.msg + " (line " +
                                    std::to_string(e.mark.line + 1) + ")");
  }
}

Result<HardwareCatalog> load_hardware_catalog(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(std::string yaml_text, read_small_file(path, kMaxCatalogBytes));
  return parse_hardware_catalog(yaml_text, path);
}

std::vector<std::string> hardware_catalog_candidates(const std::string& executable) {
  const std::filesystem::path bin = std::filesystem::path(executable).parent_path();
  return {(bin / ".." / "share" / "ckptcheck" / "hardware.yaml").lexically_normal().string(),
          (bin / ".." / "fixtures" / "hardware.yaml").lexically_normal().string(), "fixtures/hardware.yaml"};
}

Result<std::string> find_hardware_catalog(const std::vector<std::string>& candidates) {
  std::string looked;
  for (const auto& path : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path;
    looked += (looked.empty() ? "" : ", ") + path;
  }
  return Status::not_found("no hardware catalog (looked at " + looked + "); pass --catalog FILE");
}

}  // namespace ckpt
