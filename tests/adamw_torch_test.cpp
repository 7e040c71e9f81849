#include <gtest/gtest.h>

#include <cmath>

#include "fixtures/adamw.h"

namespace ckpt {
namespace {

OptimizerConfig config() {
  OptimizerConfig c;
  c.lr = 0.1;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-8;
  c.weight_decay = 0.01;
  return c;
}

at::Tensor param_with_grad(std::vector<float> values, std::vector<float> grads) {
  at::Tensor p = at::tensor(values, at::kFloat).requires_grad_(true);
  p.mutable_grad() = at::tensor(grads, at::kFloat);
  return p;
}

TEST(AdamW, FirstStepMatchesHandComputedPyTorchMath) {
  at::Tensor p = param_with_grad({1.0f, -2.0f}, {0.5f, 0.0f});
  AdamW opt(config(), {{"w", p}});
  opt.step(0.1);
  // decay: 1 * (1 - 0.1 * 0.01) = 0.999; m = 0.05; v = 0.00025; bias corrections 0.1 and 0.001:
  // p = 0.999 - (0.1 / 0.1) * 0.05 / (sqrt(0.00025) / sqrt(0.001) + 1e-8) = 0.999 - 0.05 / 0.50000001
  EXPECT_NEAR(p[0].item<double>(), 0.999 - 0.05 / 0.50000001, 1e-6);
  // Zero gradient: only the decoupled weight decay moves it (m = v = 0).
  EXPECT_NEAR(p[1].item<double>(), -2.0 * 0.999, 1e-6);
  const AdamWParamState& s = opt.state().at("w");
  EXPECT_EQ(s.step, 1);
  EXPECT_NEAR(s.exp_avg[0].item<double>(), 0.05, 1e-7);
  EXPECT_NEAR(s.exp_avg_sq[0].item<double>(), 0.00025, 1e-9);
}

TEST(AdamW, SecondStepUsesBiasCorrectionOfStepTwo) {
  at::Tensor p = param_with_grad({1.0f}, {0.5f});
  AdamW opt(config(), {{"w", p}});
  opt.step(0.1);
  double p1 = p.item<double>();
  opt.step(0.1);  // same gradient again
  double m = 0.9 * 0.05 + 0.1 * 0.5, v = 0.999 * 0.00025 + 0.001 * 0.25;
  double expected =
      p1 * 0.999 - (0.1 / (1 - 0.81)) * m / (std::sqrt(v) / std::sqrt(1 - 0.999 * 0.999) + 1e-8);
  EXPECT_NEAR(p.item<double>(), expected, 1e-6);
  EXPECT_EQ(opt.state().at("w").step, 2);
}

TEST(AdamW, ParametersWithoutGradientAreUntouched) {
  at::Tensor with = param_with_grad({1.0f}, {1.0f});
  at::Tensor without = at::tensor(std::vector<float>{3.0f}, at::kFloat).requires_grad_(true);
  AdamW opt(config(), {{"a", with}, {"b", without}});
  opt.step(0.1);
  EXPECT_EQ(without.item<float>(), 3.0f);
  EXPECT_EQ(opt.state().at("b").step, 0);
  EXPECT_EQ(opt.state_bytes(), 2 * (2 * 4 + 8));
}

}  // namespace
}  // namespace ckpt
