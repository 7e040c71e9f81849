#include "verifier/pins/drift.h"

#include <algorithm>

#include "verifier/pins/pins.h"

namespace ckpt {
namespace {

const char kMissing[] = "missing";
const char kFingerprintSha[] = "container_fingerprint.sha256";

std::string top_level(const std::string& field) {
  return field.substr(0, field.find('.'));
}

std::string printed(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

DriftSeverity severity_of(const std::string& field, const std::set<std::string>& allowed) {
  if (!is_blocking_field(field)) return DriftSeverity::kWarning;
  if (allowed.count(field) || allowed.count(top_level(field))) return DriftSeverity::kOverridden;
  return DriftSeverity::kBlocking;
}

}  // namespace

const char* drift_severity_name(DriftSeverity severity) {
  switch (severity) {
    case DriftSeverity::kBlocking: return "blocking";
    case DriftSeverity::kOverridden: return "overridden";
    case DriftSeverity::kWarning: return "warning";
  }
  return "unknown";
}

std::string DriftItem::describe() const {
  return field + ": checkpoint " + recorded + ", now " + current;
}

bool is_blocking_field(const std::string& field) {
  return field == "config_sha256" || field == "model_revision" || field == "dataset_revision" ||
         top_level(field) == "seeds";
}

bool DriftReport::blocking() const {
  return std::any_of(items.begin(), items.end(),
                     [](const DriftItem& item) { return item.severity == DriftSeverity::kBlocking; });
}

std::string DriftReport::summary() const {
  if (items.empty()) return "no drift\n";
  std::string text;
  for (const DriftItem& item : items) {
    text += std::string(drift_severity_name(item.severity)) + ": " + item.describe() + "\n";
  }
  return text;
}

nlohmann::json DriftReport::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const DriftItem& item : items) {
    list.push_back({{"field", item.field},
                    {"recorded", item.recorded},
                    {"current", item.current},
                    {"severity", drift_severity_name(item.severity)}});
  }
  return {{"blocking", blocking()}, {"items", list}};
}

DriftReport compare_pins(const nlohmann::json& recorded, const nlohmann::json& current,
                         const std::set<std::string>& allowed) {
  const auto then = pin_fields(recorded);
  const auto now = pin_fields(current);
  std::set<std::string> fields;
  for (const auto& entry : then) fields.insert(entry.first);
  for (const auto& entry : now) fields.insert(entry.first);

  DriftReport report;
  bool container_input_differs = false;
  for (const std::string& field : fields) {
    const auto a = then.find(field);
    const auto b = now.find(field);
    if (a != then.end() && b != now.end() && a->second == b->second) continue;
    DriftItem item{field, a == then.end() ? kMissing : printed(a->second),
                   b == now.end() ? kMissing : printed(b->second), severity_of(field, allowed)};
    if (top_level(field) == "container_fingerprint" && field != kFingerprintSha)
      container_input_differs = true;
    report.items.push_back(std::move(item));
  }
  // The fingerprint's hash differing is implied by the inputs that differ, which say more.
  if (container_input_differs) {
    report.items.erase(std::remove_if(report.items.begin(), report.items.end(),
                                      [](const DriftItem& item) { return item.field == kFingerprintSha; }),
                       report.items.end());
  }
  return report;
}

}  // namespace ckpt
