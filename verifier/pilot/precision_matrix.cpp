#include "verifier/pilot/precision_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/byte_units.h"
#include "verifier/tensors/state_compare.h"

namespace ckpt {

namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string percent(double fraction) {
  return format("%.0f%%", 100 * fraction);
}

std::string signed_percent(double fraction) {
  return format("%+.0f%%", 100 * fraction);
}

const VariantMeasurement* find(const std::vector<VariantMeasurement>& all, const std::string& precision,
                               const std::string& ac) {
  for (const VariantMeasurement& v : all) {
    if (v.precision == precision && v.activation_checkpointing == ac) return &v;
  }
  return nullptr;
}

struct LossDiff {
  double max_relative = 0;
  double mean_relative = 0;
  int64_t steps = 0;
  bool identical = true;
};

LossDiff compare_losses(const std::vector<double>& got, const std::vector<double>& reference) {
  LossDiff d;
  const size_t n = std::min(got.size(), reference.size());
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = relative_difference(reference[i], got[i]);
    raise_to(&d.max_relative, r);  // a NaN loss must not vanish in a max
    sum += r;
    if (got[i] != reference[i]) d.identical = false;
  }
  d.steps = static_cast<int64_t>(n);
  d.mean_relative = n ? sum / static_cast<double>(n) : 0;
  if (got.size() != reference.size()) d.identical = false;
  return d;
}

void add_check(nlohmann::json& out, const std::string& name, bool passed, const std::string& detail) {
  out["checks"].push_back({{"name", name}, {"passed", passed}, {"detail", detail}});
}

// One variant's measurements and how its numerics compare with plain fp32's.
nlohmann::json variant_row(const VariantMeasurement& v, const VariantMeasurement& fp32) {
  const LossDiff d = compare_losses(v.losses, fp32.losses);
  return {{"name", v.name()},
          {"precision", v.precision},
          {"activation_checkpointing", v.activation_checkpointing},
          {"step_peak_rss_bytes", v.step_peak_rss_bytes},
          {"step_memory_bytes", v.step_memory_bytes()},
          {"step_seconds", v.step_seconds},
          {"tokens_per_second", v.tokens_per_second},
          {"eval_loss", v.eval_loss},
          {"eval_logits_sha256", v.eval_logits_sha256},
          {"vs_fp32",
           {{"loss_max_relative_difference", d.max_relative},
            {"loss_mean_relative_difference", d.mean_relative},
            {"steps_compared", d.steps},
            {"eval_loss_relative_difference", relative_difference(fp32.eval_loss, v.eval_loss)},
            {"bit_identical", d.identical && v.eval_logits_sha256 == fp32.eval_logits_sha256}}}};
}

// Activation checkpointing at each precision: its check (bit-exact), its memory/time trade in
// out["recompute"], and a summary line.
void add_recompute_findings(const std::vector<VariantMeasurement>& variants, nlohmann::json& out) {
  for (const std::string precision : {"fp32", "bf16"}) {
    const VariantMeasurement& off = *find(variants, precision, "none");
    const VariantMeasurement& on = *find(variants, precision, "blocks");
    // Recompute replays the same ops on the same inputs with the same RNG: not one bit may move.
    const LossDiff d = compare_losses(on.losses, off.losses);
    const bool same = d.identical && on.eval_logits_sha256 == off.eval_logits_sha256;
    add_check(out, precision + " activation checkpointing is bit-exact", same,
              same ? "every step's loss and the eval logits identical with and without recompute"
                   : "recompute changed the numerics: max relative loss difference " +
                         format("%.3g", d.max_relative) + " over " + std::to_string(d.steps) + " steps");
    const double memory_saved =
        off.step_memory_bytes() > 0 ? 1 - on.step_memory_bytes() / off.step_memory_bytes() : 0;
    const double time_cost = off.step_seconds > 0 ? on.step_seconds / off.step_seconds - 1 : 0;
    out["recompute"][precision] = {
        {"step_memory_saved_fraction", memory_saved},
        {"step_memory_saved_bytes", off.step_memory_bytes() - on.step_memory_bytes()},
        {"step_time_cost_fraction", time_cost}};
    out["summary"].push_back(
        "Activation checkpointing (" + precision + "): the step's memory " +
        format("%.1f", off.step_memory_bytes() / kBytesPerMiB) + " -> " +
        format("%.1f", on.step_memory_bytes() / kBytesPerMiB) + " MiB (" +
        (memory_saved >= 0 ? percent(memory_saved) + " less" : percent(-memory_saved) + " more") + ") for " +
        signed_percent(time_cost) + " step time (the recompute); " +
        (same ? "numerics unchanged, bit for bit." : "NUMERICS CHANGED."));
  }
}

// bf16 against fp32, with and without recompute: its checks (losses within the tolerance), then a
// summary line of what bf16 buys.
void add_bf16_findings(const std::vector<VariantMeasurement>& variants, const MatrixOptions& options,
                       nlohmann::json& out) {
  for (const std::string ac : {"none", "blocks"}) {
    const VariantMeasurement& bf16 = *find(variants, "bf16", ac);
    const VariantMeasurement& base = *find(variants, "fp32", ac);
    const LossDiff d = compare_losses(bf16.losses, base.losses);
    const double eval_diff = relative_difference(base.eval_loss, bf16.eval_loss);
    const bool within = d.max_relative <= options.loss_rtol && eval_diff <= options.loss_rtol;
    add_check(out, std::string("bf16 numerics") + (ac == "blocks" ? " (with activation checkpointing)" : ""),
              within,
              "per-step loss max relative difference " + format("%.3g", d.max_relative) + ", mean " +
                  format("%.3g", d.mean_relative) + ", eval loss " + format("%.4f", bf16.eval_loss) + " vs " +
                  format("%.4f", base.eval_loss) + " (" + format("%.3g", eval_diff) + "); tolerance " +
                  format("%.3g", options.loss_rtol));
  }
  const VariantMeasurement& fp32 = *find(variants, "fp32", "none");
  const VariantMeasurement& bf16 = *find(variants, "bf16", "none");
  const double bf16_memory =
      fp32.step_memory_bytes() > 0 ? 1 - bf16.step_memory_bytes() / fp32.step_memory_bytes() : 0;
  const double bf16_time = fp32.step_seconds > 0 ? bf16.step_seconds / fp32.step_seconds - 1 : 0;
  const LossDiff bf16_losses = compare_losses(bf16.losses, fp32.losses);
  out["summary"].push_back(
      "bf16 autocast: the step's memory " +
      (bf16_memory >= 0 ? percent(bf16_memory) + " less" : percent(-bf16_memory) + " more") + ", step time " +
      signed_percent(bf16_time) + "; losses within " + format("%.2g%%", 100 * bf16_losses.max_relative) +
      " of fp32 (largest step), eval loss " + format("%.4f", bf16.eval_loss) + " vs " +
      format("%.4f", fp32.eval_loss) +
      ". Parameters, gradients and AdamW moments stay fp32 under autocast: bf16 saves activation memory "
      "only.");
}

// Which fits where: the cheapest variant in time, the smallest in memory, and the price of moving
// from the first to the second.
void add_recommendation(const std::vector<VariantMeasurement>& variants, nlohmann::json& out) {
  const VariantMeasurement* fastest = &variants.front();
  const VariantMeasurement* smallest = &variants.front();
  for (const VariantMeasurement& v : variants) {
    if (v.step_seconds < fastest->step_seconds) fastest = &v;
    if (v.step_memory_bytes() < smallest->step_memory_bytes()) smallest = &v;
  }
  out["fastest"] = fastest->name();
  out["smallest"] = smallest->name();
  if (fastest == smallest) {
    out["summary"].push_back("Use " + fastest->name() + ": it is both the fastest and the smallest here.");
  } else {
    out["summary"].push_back(
        "Where memory is not the limit, use " + fastest->name() + " (fastest, " +
        format("%.1f", fastest->step_memory_bytes() / kBytesPerMiB) + " MiB per step). Where it is, " +
        smallest->name() + " needs " + format("%.1f", smallest->step_memory_bytes() / kBytesPerMiB) +
        " MiB for " +
        signed_percent(fastest->step_seconds > 0 ? smallest->step_seconds / fastest->step_seconds - 1 : 0) +
        " step time. Take the cheaper choice that fits the accelerator (`ckptcheck plan` sizes it), and "
        "measure again "
        "on the target: CPU bf16 timings do not carry over to tensor cores.");
  }
}

}  // namespace

std::string VariantMeasurement::name() const {
  return precision + (activation_checkpointing == "blocks" ? "+ac" : "");
}

std::vector<std::pair<std::string, std::string>> matrix_variants() {
  return {{"fp32", "none"}, {"fp32", "blocks"}, {"bf16", "none"}, {"bf16", "blocks"}};
}

Result<nlohmann::json> analyze_matrix(const std::vector<VariantMeasurement>& variants,
                                      const MatrixOptions& options) {
  for (const auto& [precision, ac] : matrix_variants()) {
    if (!find(variants, precision, ac)) {
      return Status::invalid_argument("pilot matrix: variant " + precision +
                                      " with activation_checkpointing " + ac + " was not measured");
    }
  }
  const VariantMeasurement& fp32 = *find(variants, "fp32", "none");
  nlohmann::json out = {{"loss_rtol", options.loss_rtol},
                        {"memory_source", "VmHWM over one full step including the optimizer step"},
                        {"variants", nlohmann::json::array()},
                        {"recompute", nlohmann::json::object()},
                        {"checks", nlohmann::json::array()},
                        {"summary", nlohmann::json::array()}};
  for (const auto& [precision, ac] : matrix_variants())
    out["variants"].push_back(variant_row(*find(variants, precision, ac), fp32));
  add_recompute_findings(variants, out);
  add_bf16_findings(variants, options, out);
  add_recommendation(variants, out);
  bool all_passed = true;
  for (const auto& c : out["checks"]) all_passed = all_passed && c["passed"].get<bool>();
  out["passed"] = all_passed;
  return out;
}

std::string matrix_table(const nlohmann::json& matrix) {
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %12s %12s %10s %10s %11s %11s %10s\n", "variant", "step MiB",
                "peak MiB", "step s", "tokens/s", "loss maxrel", "loss meanrel", "eval loss");
  text += line;
  for (const auto& v : matrix["variants"]) {
    std::snprintf(line, sizeof line, "%-9s %12.1f %12.1f %10.4f %10.0f %11.2e %11.2e %10.4f\n",
                  v["name"].get<std::string>().c_str(), v["step_memory_bytes"].get<double>() / kBytesPerMiB,
                  v["step_peak_rss_bytes"].get<double>() / kBytesPerMiB, v["step_seconds"].get<double>(),
                  v["tokens_per_second"].get<double>(),
                  v["vs_fp32"]["loss_max_relative_difference"].get<double>(),
                  v["vs_fp32"]["loss_mean_relative_difference"].get<double>(), v["eval_loss"].get<double>());
    text += line;
  }
  text +=
      "(step MiB: resident growth over one full step incl. the optimizer step; maxrel, meanrel: per-step "
      "loss relative to fp32)\n";
  for (const auto& c : matrix["checks"]) {
    text += std::string(c["passed"].get<bool>() ? "ok    " : "FAIL  ") + c["name"].get<std::string>() + ": " +
            c["detail"].get<std::string>() + "\n";
  }
  for (const auto& s : matrix["summary"]) text += s.get<std::string>() + "\n";
  return text;
}

}  // namespace ckpt
