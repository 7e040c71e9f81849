// Drift: how the pins recorded in a checkpoint differ from the pins computed now. A different
// config, model or dataset means the resumed run would not be the same run: that blocks, unless
// the operator allowed that field. A different library or container may change numerics in the
// last bits: that warns. Every differing field is named with both values.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace ckpt {

enum class DriftSeverity {
  kBlocking,    // config / model / dataset / seeds differ
  kOverridden,  // would block, but the field was allowed
  kWarning,     // dependencies, container fingerprint, anything else
};

const char* drift_severity_name(DriftSeverity severity);  // "blocking" | "overridden" | "warning"

struct DriftItem {
  std::string field;     // dotted pin field: "dependencies.libtorch"
  std::string recorded;  // "missing" when the checkpoint did not record it
  std::string current;   // "missing" when it is not computed now
  DriftSeverity severity;
  // "dependencies.libtorch: checkpoint 1.13.0, now 2.1.0"
  std::string describe() const;
};

struct DriftReport {
  std::vector<DriftItem> items;  // sorted by field

  bool blocking() const;           // any item is kBlocking
  std::string summary() const;     // one line per item, "no drift" when there is none
  nlohmann::json to_json() const;  // {"blocking": bool, "items": [{field, recorded, current, severity}]}
};

// The pin fields whose difference blocks: config_sha256, model_revision, dataset_revision, seeds.*
bool is_blocking_field(const std::string& field);

// `allowed` names fields (or a top-level group such as "seeds") whose blocking difference is
// accepted and recorded as kOverridden.
DriftReport compare_pins(const nlohmann::json& recorded, const nlohmann::json& current,
                         const std::set<std::string>& allowed);

}  // namespace ckpt
