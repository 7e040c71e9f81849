// The matrix's arithmetic, checks and words on numbers chosen by hand.
#include "verifier/pilot/precision_matrix.h"

#include <gtest/gtest.h>

#include <cmath>

#include "verifier/pilot/pilot_html.h"

namespace ckpt {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

VariantMeasurement variant(const std::string& precision, const std::string& ac, double step_mib,
                           double seconds, std::vector<double> losses, double eval, const std::string& sha) {
  VariantMeasurement v;
  v.precision = precision;
  v.activation_checkpointing = ac;
  v.step_rss_before_bytes = 100 * kMiB;
  v.step_peak_rss_bytes = (100 + step_mib) * kMiB;
  v.step_seconds = seconds;
  v.tokens_per_second = 1000 / seconds;
  v.losses = std::move(losses);
  v.eval_loss = eval;
  v.eval_logits_sha256 = sha;
  return v;
}

std::vector<VariantMeasurement> four() {
  return {variant("fp32", "none", 80, 0.10, {4.0, 3.0}, 2.0, "a"),
          variant("fp32", "blocks", 20, 0.13, {4.0, 3.0}, 2.0, "a"),
          variant("bf16", "none", 60, 0.20, {4.04, 3.03}, 2.02, "b"),
          variant("bf16", "blocks", 15, 0.25, {4.04, 3.03}, 2.02, "b")};
}

TEST(PrecisionMatrix, NumbersByHand) {
  Result<nlohmann::json> m = analyze_matrix(four(), MatrixOptions{});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const nlohmann::json& j = *m;
  ASSERT_EQ(j["variants"].size(), 4u);
  EXPECT_EQ(j["variants"][1]["name"], "fp32+ac");
  EXPECT_DOUBLE_EQ(j["variants"][0]["step_memory_bytes"].get<double>(), 80 * kMiB);
  // fp32: 1 - 20/80 = 0.75 saved for 0.13/0.10 - 1 = 30% more time.
  EXPECT_DOUBLE_EQ(j["recompute"]["fp32"]["step_memory_saved_fraction"].get<double>(), 0.75);
  EXPECT_NEAR(j["recompute"]["fp32"]["step_time_cost_fraction"].get<double>(), 0.30, 1e-12);
  EXPECT_NEAR(j["recompute"]["bf16"]["step_memory_saved_fraction"].get<double>(), 0.75, 1e-12);
  EXPECT_NEAR(j["recompute"]["bf16"]["step_time_cost_fraction"].get<double>(), 0.25, 1e-12);
  // bf16 vs fp32: |4.04-4|/4 = 0.01 and |3.03-3|/3 = 0.01; eval 0.01.
  const auto& bf16 = j["variants"][2]["vs_fp32"];
  EXPECT_NEAR(bf16["loss_max_relative_difference"].get<double>(), 0.01, 1e-12);
  EXPECT_NEAR(bf16["loss_mean_relative_difference"].get<double>(), 0.01, 1e-12);
  EXPECT_NEAR(bf16["eval_loss_relative_difference"].get<double>(), 0.01, 1e-12);
  EXPECT_FALSE(bf16["bit_identical"].get<bool>());
  EXPECT_TRUE(j["variants"][1]["vs_fp32"]["bit_identical"].get<bool>());
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["fastest"], "fp32");
  EXPECT_EQ(j["smallest"], "bf16+ac");
  const std::string table = matrix_table(j);
  EXPECT_NE(table.find("80.0 -> 20.0 MiB (75% less) for +30% step time"), std::string::npos) << table;
  EXPECT_NE(table.find("Where memory is not the limit, use fp32"), std::string::npos) << table;
}

TEST(PrecisionMatrix, RecomputeThatChangesABitFails) {
  std::vector<VariantMeasurement> v = four();
  v[1].losses[1] = 3.0000001;
  Result<nlohmann::json> m = analyze_matrix(v, MatrixOptions{});
  ASSERT_TRUE(m.is_ok());
  EXPECT_FALSE((*m)["passed"].get<bool>());
  EXPECT_FALSE((*m)["checks"][0]["passed"].get<bool>());
  EXPECT_NE((*m)["checks"][0]["detail"].get<std::string>().find("recompute changed the numerics"),
            std::string::npos);
  // Other eval logits with the same losses fail too.
  v = four();
  v[3].eval_logits_sha256 = "c";
  m = analyze_matrix(v, MatrixOptions{});
  EXPECT_FALSE((*m)["checks"][1]["passed"].get<bool>());
}

TEST(PrecisionMatrix, Bf16OutsideTheToleranceFails) {
  MatrixOptions tight;
  tight.loss_rtol = 0.005;  // the 1% differences above are outside
  Result<nlohmann::json> m = analyze_matrix(four(), tight);
  ASSERT_TRUE(m.is_ok());
  EXPECT_FALSE((*m)["passed"].get<bool>());
  EXPECT_FALSE((*m)["checks"][2]["passed"].get<bool>());
  EXPECT_TRUE((*m)["checks"][0]["passed"].get<bool>());
}

TEST(PrecisionMatrix, ANanBf16LossFailsItsCheck) {
  // A diverged bf16 step must not vanish inside a max over the steps.
  std::vector<VariantMeasurement> v = four();
  v[2].losses[0] = std::nan("");
  Result<nlohmann::json> m = analyze_matrix(v, MatrixOptions{});
  ASSERT_TRUE(m.is_ok());
  EXPECT_FALSE((*m)["passed"].get<bool>());
  EXPECT_FALSE((*m)["checks"][2]["passed"].get<bool>()) << (*m)["checks"][2].dump();
  EXPECT_TRUE((*m)["checks"][3]["passed"].get<bool>());  // bf16+ac still has finite losses
}

TEST(PrecisionMatrix, AMissingVariantIsAnError) {
  std::vector<VariantMeasurement> v = four();
  v.pop_back();
  Result<nlohmann::json> m = analyze_matrix(v, MatrixOptions{});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("bf16 with activation_checkpointing blocks"), std::string::npos);
}

TEST(PilotHtml, BarChartScalesToTheLargestAndEscapesLabels) {
  const std::string svg = svg_bar_chart("step memory", {{"fp32", 80}, {"<b>", 20}}, "MiB");
  EXPECT_NE(svg.find("width=\"260\""), std::string::npos) << svg;  // the largest bar is full width
  EXPECT_NE(svg.find("width=\"65\""), std::string::npos) << svg;   // 260 * 20 / 80
  EXPECT_NE(svg.find("&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  nlohmann::json report = {{"config_path", "p.yaml"}, {"steps", 2}, {"cores", 2}};
  report["matrix"] = *analyze_matrix(four(), MatrixOptions{});
  const std::string html = render_pilot_html(report);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("fp32+ac"), std::string::npos);
  EXPECT_NE(html.find("bit-exact"), std::string::npos);
}

}  // namespace
}  // namespace ckpt
