// What the drill compares between the uninterrupted reference run and the killed-and-resumed run:
// per-step training metrics, eval logits and the final state tensors grouped by component. Pure
// byte/number comparisons, torch-free, so every rule here is unit-tested without training.
//
// Rule: a value passes iff |resumed - reference| <= atol + rtol * |reference|. Integer, U8 and
// BOOL tensors must match exactly whatever the tolerance (a step counter or an RNG state that is
// "close" is wrong). NaN matches NaN only bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "shards/tensor_view.h"

namespace ckpt {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
  bool exact() const { return rtol == 0 && atol == 0; }
};

bool within_tolerance(double reference, double resumed, const Tolerance& tolerance);
// |value - reference| / |reference|: 0 when equal (NaN and NaN included), infinite when the
// reference is 0 and the value is not, NaN when one side is NaN.
double relative_difference(double reference, double value);
// *current = max(*current, value), except that a NaN wins: a NaN difference is the worst there is,
// and std::max would silently drop it.
void raise_to(double* current, double value);

// One step of a metrics log: the drill contract's `{"step": int, "loss": number, ...}` line. Every
// further numeric field is compared too, except timings (names ending in "_ms" or "_seconds"),
// which differ run to run and are reported, not compared.
struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  std::map<std::string, double> values;  // lr, grad_norm, loss_scale, eval_loss, tokens, ...
};

// `{"event": "checkpoint", "step": int, "path": "<file or directory>"}`: written after a checkpoint
// is durable.
struct CheckpointEvent {
  int64_t step = 0;
  std::string path;
};

struct MetricsLog {
  std::vector<StepRecord> steps;
  std::vector<CheckpointEvent> checkpoints;
};

// A checkpoint event's "path" as the drill reads it: a relative path is relative to the run's
// checkpoint dir (CKPTCHECK_CKPT_DIR), where the program saved it; "" leaves it as it is.
std::string resolve_announced_path(const std::string& path, const std::string& checkpoint_dir);

// Parses a metrics JSONL file. A torn last line (the writer was SIGKILLed) is dropped; any other
// malformed line is kCorruption naming the file and line number, quoting the line and saying what
// it lacks. Lines with another "event" are skipped. Relative checkpoint paths are resolved against
// `checkpoint_dir` (resolve_announced_path). `complete_lines_only`: the file of a run still
// writing it: a last line without its newline is left for later, and every complete line must parse.
Result<MetricsLog> read_metrics_log(const std::string& path, const std::string& checkpoint_dir = "",
                                    bool complete_lines_only = false);
Result<std::vector<StepRecord>> read_step_metrics(const std::string& path);

// One metric ("loss", then every other compared field of the reference, by name) over the steps
// both runs have.
struct SeriesDiff {
  std::string field;
  int64_t steps_compared = 0;
  double max_abs = 0;
  double max_rel = 0;
  bool bit_identical = true;
  bool passed = true;
  int64_t first_diverging_step = -1;  // first step outside tolerance; -1 if none
  double reference_at_first = 0;
  double resumed_at_first = 0;
  std::vector<int64_t> missing_steps;  // resumed steps the reference lacks (fails the check)
  std::vector<int64_t> missing_field;  // resumed steps that lack a field the reference step has
};

// Compares every resumed step with the reference step of the same number.
std::vector<SeriesDiff> compare_step_metrics(const std::vector<StepRecord>& reference,
                                             const std::vector<StepRecord>& resumed,
                                             const Tolerance& tolerance);

struct TensorDiff {
  std::string name;
  std::string component;
  std::string mismatch;  // dtype/shape/missing: not comparable element by element ("" if comparable)
  int64_t elements = 0;
  int64_t differing_elements = 0;  // not bit-identical
  int64_t exceeding_elements = 0;  // outside tolerance
  double max_abs = 0;
  double max_rel = 0;
  std::vector<int64_t> max_abs_index;    // where max_abs is; empty if none differ
  int64_t first_differing_element = -1;  // flat index of the first element that is not bit-identical
  bool bytes = false;  // a U8 tensor: a byte state (an RNG's), where "max abs" means nothing
  // False when the two sides could not be compared value by value (one side missing, another dtype
  // or shape, a non-numeric value that differs): no noise envelope can excuse that.
  bool comparable = true;
  bool bit_identical() const { return mismatch.empty() && differing_elements == 0; }
  bool passed() const { return mismatch.empty() && exceeding_elements == 0; }
};

TensorDiff compare_tensor(const TensorView& reference, const TensorView& resumed, const Tolerance& tolerance);
// What compare_tensor gives for two bit-identical tensors of `elements` elements of `dtype`: what a
// diff that knows two tensors equal by their chunks' digests reports without reading them.
TensorDiff identical_tensor_diff(const std::string& name, const std::string& component, DType dtype,
                                 int64_t elements);
// "dtype F32 vs BF16", "shape [2, 3] vs [3, 2]" (the reference's first), or "" when both tensors
// have one dtype and shape.
std::string layout_mismatch(const TensorView& reference, const TensorView& resumed);

struct ComponentDiff {
  std::string component;
  int64_t tensors = 0;
  int64_t elements = 0;
  double max_abs = 0;
  double max_rel = 0;
  bool bit_identical = true;
  bool passed = true;
  // The first tensor (in name order) that failed, with its own max abs and where it is.
  std::string first_diverging_tensor;
  std::string first_mismatch;
  double first_max_abs = 0;
  std::vector<int64_t> first_index;
  int64_t incomparable = 0;  // tensors and values with comparable == false
  // Which rule judged the component, set by whoever judged it (the drill: "bit-exact", "tolerance",
  // "envelope", "absent-as-in-control", "held-as-in-control"), and what that rule found, in words;
  // both "" when the component was only compared.
  std::string rule, note;
  int64_t first_elements = 0;         // of the first failing tensor
  int64_t first_differing_byte = -1;  // of the first failing tensor, when it is bytes (U8)
  // "optimizer diverged: optimizer.model.w.exp_avg max abs 3.1e-04 at [12, 3]"; for a byte
  // state: "rng diverged: rng.cpu_state: RNG state differs (byte 2097 of 5056)"; "" if passed.
  std::string divergence_message() const;
  // Folds one tensor's comparison in (tensors in name order, so the first failure is kept).
  void add(const TensorDiff& d);
};

// A tensor or value on one side only, not comparable: it fails its component. The reference's alone
// is kMissingInTheResumedRun, the resumed run's alone kOnlyInTheResumedRun, which a drill's resume
// comparison tells apart (verifier/drill/resume_comparison.cpp). (Two states are compared tensor by
// tensor by compare_snapshots, verifier/tensors/state_snapshot.h.)
inline constexpr std::string_view kMissingInTheResumedRun = "missing in the resumed run";
inline constexpr std::string_view kOnlyInTheResumedRun = "only in the resumed run";
TensorDiff one_side_only(const std::string& name, const std::string& component, bool in_reference);

// Flat row-major index -> multi-dimensional index.
std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape);
std::string format_number(double value);  // "0.00031", "3.7", 3 significant digits, for messages

nlohmann::json to_json(const SeriesDiff& diff);
nlohmann::json to_json(const TensorDiff& diff);
nlohmann::json to_json(const ComponentDiff& diff);

}  // namespace ckpt
