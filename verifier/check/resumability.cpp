#include "verifier/check/resumability.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "base/text.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {

namespace {

// The value of a one-element tensor, or nullopt if it was not loaded or has no single element.
std::optional<double> scalar_value(const std::map<std::string, LoadedTensor>& scalars,
                                   const std::string& name) {
  auto it = scalars.find(name);
  if (it == scalars.end() || it->second.bytes.size() != dtype_size(it->second.dtype)) return std::nullopt;
  return element_as_double(it->second.bytes.data(), it->second.dtype);
}

// Buffers (masks, counters) are saved with the model but have no optimizer state.
bool is_buffer(const ManifestTensor& t) {
  return t.component == "model" && (t.dtype == DType::kBool || t.dtype == DType::kI64);
}

class ResumeCheck {
 public:
  ResumeCheck(const Manifest& m, const std::map<std::string, LoadedTensor>& scalars, VerifyReport& r)
      : manifest_(m), scalars_(scalars), report_(r) {
    // Keyed by views of the manifest's own names (it outlives this check): at 26,000 tensors the
    // copied keys were ~130,000 string allocations, a third of this check's time (issue 44).
    by_name_.reserve(m.tensors.size());
    for (const auto& t : m.tensors) by_name_.emplace(t.name, &t);
  }

  void run() {
    check_optimizer();
    require(verify_code::kSchedulerStateMissing,
            {"scheduler.last_step", "scheduler.base_lr", "scheduler.last_lr"});
    require(verify_code::kStepStateMissing, {"progress.global_step", "progress.skipped_steps"});
    require(verify_code::kScalerStateMissing,
            {"scaler.scale", "scaler.growth_factor", "scaler.backoff_factor", "scaler.growth_interval",
             "scaler.growth_tracker"});
    require(verify_code::kDataStateMissing, {"data.epoch", "data.cursor", "data.shuffle_seed"});
    if (!has_component("rng")) {
      report_.add_error(verify_code::kRngStateMissing, "", "rng.cpu_state",
                        "no rng.* tensor: a resumed run would draw different random numbers");
    }
    check_steps();
    check_loss_scale();
  }

 private:
  // By name: a manifest with 20,000 tensors asks ~3 names per parameter, and a linear
  // Manifest::find_tensor made that quadratic (4.5 s of verify --quick at 20,001 tensors).
  const ManifestTensor* find_tensor(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  bool has_component(const std::string& component) const {
    const std::string prefix = component + ".";
    for (const auto& t : manifest_.tensors) {
      if (t.component == component || starts_with(t.name, prefix)) return true;
    }
    return false;
  }

  void require(const char* code, std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if (!find_tensor(name))
        report_.add_error(code, "", name, std::string("missing: ") + name + " is needed to resume");
    }
  }

  // Whether any tensor is named "optimizer.<param>.…". Every such prefix is indexed the first time
  // a param needs it: one whose moments and step are where AdamW puts them never does (the index
  // was ~100,000 insertions at 20,000 optimizer tensors).
  bool has_optimizer_entries(const std::string& param) {
    if (!optimized_indexed_) {
      for (const auto& t : manifest_.tensors) {
        if (!starts_with(t.name, "optimizer.")) continue;
        const std::string_view name(t.name);
        for (size_t dot = name.find('.', 10); dot != std::string_view::npos; dot = name.find('.', dot + 1))
          optimized_.insert(name.substr(10, dot - 10));
      }
      optimized_indexed_ = true;
    }
    return optimized_.count(param) != 0;
  }

  void check_optimizer() {
    const bool any_optimizer = has_component("optimizer");
    const char* const kStates[] = {".exp_avg", ".exp_avg_sq", ".step"};
    std::string names[3];
    const ManifestTensor* states[3];
    for (const auto& p : manifest_.tensors) {
      if (p.component != "model" && !starts_with(p.name, "model.")) continue;
      bool any_state = false;
      for (size_t k = 0; k < 3; ++k) {
        names[k].assign("optimizer.").append(p.name).append(kStates[k]);
        states[k] = find_tensor(names[k]);
        any_state = any_state || states[k] != nullptr;
      }
      // Any of the three is an "optimizer.<param>." entry: the index is asked only without one, and
      // only of a param that is not trainable by its dtype (a buffer, an integer tensor).
      const bool trainable =
          any_state || (dtype_is_floating(p.dtype) && !is_buffer(p)) || has_optimizer_entries(p.name);
      if (!trainable) continue;
      if (!any_optimizer) {
        report_.add_error(
            verify_code::kOptimizerStateMissing, "", p.name,
            "the checkpoint has no optimizer state at all (first trainable param: " + p.name + ")");
        return;
      }
      for (size_t k = 0; k < 2; ++k) {  // the moments
        const std::string& name = names[k];
        const ManifestTensor* m = states[k];
        if (!m) {
          report_.add_error(verify_code::kOptimizerStateMissing, "", p.name, "missing " + name);
        } else if (m->shape != p.shape) {
          report_.add_error(verify_code::kOptimizerShapeMismatch, "", name,
                            "shape " + shape_to_string(m->shape) + ", but param " + p.name + " is " +
                                shape_to_string(p.shape));
        }
      }
      if (!states[2])
        report_.add_error(verify_code::kOptimizerStateMissing, "", p.name, "missing " + names[2]);
    }
  }

  void disagree(const std::string& tensor, const std::string& message) {
    report_.add_error(verify_code::kStepDisagreement, "", tensor, message);
  }

  void check_steps() {
    const auto global = scalar_value(scalars_, "progress.global_step");
    const auto skipped = scalar_value(scalars_, "progress.skipped_steps");
    const auto last_step = scalar_value(scalars_, "scheduler.last_step");
    const auto as_int = [](double v) { return std::to_string(static_cast<long long>(v)); };
    if (global && *global != static_cast<double>(manifest_.step)) {
      disagree("progress.global_step",
               "is " + as_int(*global) + " but the manifest step is " + std::to_string(manifest_.step));
    }
    if (global && last_step && *last_step != *global) {
      disagree("scheduler.last_step",
               "is " + as_int(*last_step) + " but progress.global_step is " + as_int(*global));
    }
    if (!global || !skipped) return;
    for (const auto& t : manifest_.tensors) {
      if (!starts_with(t.name, "optimizer.") || !ends_with(t.name, ".step")) continue;
      const auto step = scalar_value(scalars_, t.name);
      if (step && *step + *skipped != *global) {
        disagree(t.name, "is " + as_int(*step) + "; with " + as_int(*skipped) + " skipped steps that makes " +
                             as_int(*step + *skipped) + ", but progress.global_step is " + as_int(*global));
      }
    }
  }

  void check_loss_scale() {
    // Absent from the manifest: reported as scaler_state_missing; not loaded: its shard is
    // unreadable, which is reported by the shard checks.
    if (!find_tensor("scaler.scale") || scalars_.count("scaler.scale") == 0) return;
    const auto scale = scalar_value(scalars_, "scaler.scale");
    if (!scale) {
      report_.add_error(verify_code::kLossScaleInvalid, "", "scaler.scale",
                        "is not a single readable number");
    } else if (!std::isfinite(*scale) || *scale <= 0) {
      report_.add_error(verify_code::kLossScaleInvalid, "", "scaler.scale",
                        "is " + std::to_string(*scale) + ", expected finite and > 0");
    }
  }

  const Manifest& manifest_;
  const std::map<std::string, LoadedTensor>& scalars_;
  VerifyReport& report_;
  std::unordered_map<std::string_view, const ManifestTensor*> by_name_;
  std::unordered_set<std::string_view> optimized_;  // params with "optimizer.<param>." entries
  bool optimized_indexed_ = false;
};

}  // namespace

bool is_resume_scalar(const ManifestTensor& t) {
  const auto nbytes = checked_nbytes(t.shape, t.dtype);
  if (!nbytes || *nbytes > kMaxResumeScalarBytes) return false;
  if (starts_with(t.name, "optimizer.")) return ends_with(t.name, ".step");
  return starts_with(t.name, "scheduler.") || starts_with(t.name, "scaler.") ||
         starts_with(t.name, "progress.");
}

void check_resumability(const Manifest& manifest, const std::map<std::string, LoadedTensor>& scalars,
                        VerifyReport& report) {
  ResumeCheck(manifest, scalars, report).run();
}

}  // namespace ckpt
