#include <gtest/gtest.h>

#include "fixtures/transformer_lm.h"

namespace ckpt {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 2;
  m.d_ff = 32;
  m.dropout = 0.1;
  return m;
}

TEST(TransformerLm, NamesShapesAndInit) {
  TransformerLm lm(small_model(), 11, 8, 42);
  std::map<std::string, at::Tensor> p;
  for (const NamedTensor& t : lm.parameters()) p[t.name] = t.tensor;
  EXPECT_EQ(p.size(), 2u + 2 * 12 + 3);
  EXPECT_EQ(p.at("tok_emb").sizes().vec(), (std::vector<int64_t>{11, 16}));
  EXPECT_EQ(p.at("pos_emb").sizes().vec(), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(p.at("blocks.1.attn.w_qkv").sizes().vec(), (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(p.at("blocks.0.mlp.w_out").sizes().vec(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(p.at("lm_head").sizes().vec(), (std::vector<int64_t>{11, 16}));
  EXPECT_TRUE(at::equal(p.at("blocks.0.ln1.weight"), at::ones({16})));
  EXPECT_TRUE(at::equal(p.at("blocks.0.attn.b_qkv"), at::zeros({48})));
  double std = p.at("blocks.0.mlp.w_in").std().item<double>();
  EXPECT_NEAR(std, 0.02, 0.004);
  for (const auto& [name, t] : p) EXPECT_TRUE(t.requires_grad()) << name;
  ASSERT_EQ(lm.buffers().size(), 1u);
  EXPECT_EQ(lm.buffers()[0].name, "causal_mask");
  EXPECT_EQ(lm.buffers()[0].tensor.scalar_type(), at::kBool);
  EXPECT_FALSE(lm.buffers()[0].tensor.requires_grad());
}

TEST(TransformerLm, SameSeedSameWeightsOtherSeedOthers) {
  TransformerLm a(small_model(), 11, 8, 42), b(small_model(), 11, 8, 42), c(small_model(), 11, 8, 43);
  EXPECT_TRUE(at::equal(a.parameters()[0].tensor, b.parameters()[0].tensor));
  EXPECT_FALSE(at::equal(a.parameters()[0].tensor, c.parameters()[0].tensor));
}

TEST(TransformerLm, IsCausalAndDropoutOnlyInTraining) {
  at::NoGradGuard no_grad;
  TransformerLm lm(small_model(), 11, 8, 42);
  at::Tensor tokens = at::arange(8, at::kLong).remainder(11).view({1, 8});
  at::Tensor changed = tokens.clone();
  changed[0][7] = 3;
  at::Tensor a = lm.forward(tokens, false), b = lm.forward(changed, false);
  EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{1, 8, 11}));
  EXPECT_TRUE(at::equal(a.slice(1, 0, 7), b.slice(1, 0, 7)));  // earlier positions cannot see token 7
  EXPECT_FALSE(at::equal(a.slice(1, 7, 8), b.slice(1, 7, 8)));
  EXPECT_TRUE(at::equal(a, lm.forward(tokens, false)));
  EXPECT_FALSE(at::equal(lm.forward(tokens, true), lm.forward(tokens, true)));
}

TEST(TransformerLm, ClearGradsLeavesThemUndefined) {
  TransformerLm lm(small_model(), 11, 8, 42);
  at::Tensor tokens = at::zeros({2, 8}, at::kLong);
  lm.forward(tokens, true).sum().backward();
  EXPECT_EQ(lm.gradient_bytes(), lm.parameter_bytes());
  lm.clear_grads();
  EXPECT_EQ(lm.gradient_bytes(), 0);
  for (const NamedTensor& p : lm.parameters()) EXPECT_FALSE(p.tensor.grad().defined()) << p.name;
}

}  // namespace
}  // namespace ckpt
