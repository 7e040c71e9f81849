// `diff`: two tensor sources (checkpoints, roots, tensor files of any format, HF indexes) compared
// tensor by tensor by name, whatever their formats and shardings, with the drill's rule
// (state_compare.h compare_tensor, folded per component by ComponentDiff::add as compare_snapshots
// does, state_snapshot.h). Tensors are read one pair at a time, so memory is bounded by the largest tensor.
// The engine behind the `diff` command and api/ckptcheck.h diff().
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/state_step.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {

struct DiffedTensor {
  TensorDiff diff;
  std::vector<int64_t> first_index;  // the first element not bit-identical; empty when none
};

struct ComponentRows {
  ComponentDiff summary;
  std::vector<DiffedTensor> rows;
};

// A non-tensor value of the training state (a step, a data position, a scheduler's last_epoch, an
// RNG's Python state, an object's class) that differs, by dotted path; a side where it is absent
// holds null and `missing_on` names it.
struct ValueDifference {
  std::string path;
  nlohmann::json a, b;         // for JSON readers: lossy (a tuple shows as a list); see the types
  std::string a_type, b_type;  // Python's type names: "tuple", "list", "bytes", an object's class
  std::string a_repr, b_repr;  // Python's repr, shortened: (0.9, 0.999), b'\x00', 'text'
  std::string missing_on;      // "a" | "b" | ""
};

struct CheckpointDiff {
  std::string a, b;  // the sources as opened
  Tolerance tolerance;
  std::map<std::string, ComponentRows> components;
  // Every non-tensor value of the state compared too (the values each side's reader gives: a
  // torch.save file's pickle values, a ckptcheck checkpoint's step and extra state); the first
  // kDiffMaxListedValues differences are listed, all are counted.
  std::vector<ValueDifference> values;
  size_t values_differing = 0;
  // One line before the details when the sides are different steps: "step 20 vs 15 (b is an older
  // checkpoint)"; empty otherwise.
  std::string headline;
  bool identical = true;  // every tensor and value on both sides, within tolerance
};
constexpr size_t kDiffMaxListedValues = 200;

// kIoError and friends when a side cannot be opened or read; a difference is a result.
Result<CheckpointDiff> diff_checkpoints(const std::string& a, const std::string& b,
                                        const Tolerance& tolerance);
// The same of two sources already open (TensorSource::open of A, then of B).
Result<CheckpointDiff> diff_sources(const TensorSource& a, const TensorSource& b, const Tolerance& tolerance);

nlohmann::json checkpoint_diff_to_json(const CheckpointDiff& diff);
// "SAME a vs b" / "DIFF a vs b", a line per component, a line per differing tensor.
std::string checkpoint_diff_to_text(const CheckpointDiff& diff);

}  // namespace ckpt
