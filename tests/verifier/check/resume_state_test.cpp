// Resume state recognised by its structure (verifier/check/resume_state.h), on trees shaped as the
// readers flatten them: a DCP's fqns, a Lightning checkpoint's lists, numpy's and Python's RNG
// states. The files Debian's PyTorch wrote go through the built binary in
// tests/cli/verify_resume_state_test.cpp.
#include "verifier/check/resume_state.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

std::vector<std::string> parts_at(const std::vector<ResumeStateFound>& found, const std::string& part) {
  std::vector<std::string> where;
  for (const auto& f : found) {
    if (f.part == part) where.push_back(f.where);
  }
  return where;
}

TEST(ResumeState, DcpFlattenedOptimizerAndSchedulerAreFoundUnderAnyKey) {
  ResumeStateTree tree;
  tree.add_tensor("net.w", DType::kF32, {4, 4});
  tree.add_tensor("o.state.net.w.exp_avg", DType::kF32, {4, 4});
  tree.add_value("o.param_groups.0.lr", {{"__bytes__", true}});
  tree.add_value("lr.last_epoch", {{"__bytes__", true}});
  tree.add_value("lr._last_lr", {{"__bytes__", true}});
  tree.add_value("it", {{"__bytes__", true}});
  tree.add_value("global_step", {{"__bytes__", true}});
  const auto found = tree.find();
  EXPECT_EQ(parts_at(found, "optimizer"), std::vector<std::string>{"o"});
  EXPECT_EQ(parts_at(found, "scheduler"), std::vector<std::string>{"lr"});
  EXPECT_EQ(parts_at(found, "step"), std::vector<std::string>{"global_step"});
  // The per-parameter `step` inside an optimizer is not the training step.
  tree.add_tensor("o.state.net.w.step", DType::kF32, {});
  EXPECT_EQ(parts_at(tree.find(), "step"), std::vector<std::string>{"global_step"});
}

TEST(ResumeState, LightningListsAndRngStatesAreFound) {
  ResumeStateTree tree;
  // A Lightning checkpoint whose optimizer holds no tensor (SGD without momentum): one metadata value.
  tree.add_value("optimizer_states",
                 nlohmann::json::array({{{"state", nlohmann::json::object()},
                                         {"param_groups", nlohmann::json::array({{{"lr", 0.1}}})}}}));
  tree.add_value("lr_schedulers", nlohmann::json::array({{{"last_epoch", 3}, {"base_lrs", {0.1}}}}));
  tree.add_tensor("rng.cpu", DType::kU8, {5056});
  tree.add_tensor("rng.cuda.0", DType::kU8, {16});
  tree.add_tensor("mask", DType::kU8, {16});  // 16 bytes under a name that says nothing: not RNG
  tree.add_value("rng.numpy.0", "MT19937");
  tree.add_tensor("rng.numpy.1", DType::kU32, {624});
  tree.add_value("rng.gen", {{"bit_generator", "PCG64"}, {"state", {{"state", 1}, {"inc", 3}}}});
  nlohmann::json python = nlohmann::json::array({3, nlohmann::json::array(), nullptr});
  for (int i = 0; i < 625; ++i) python[1].push_back(i);
  tree.add_value("rng.python", python);
  tree.add_value("epoch", 2);
  const auto found = tree.find();
  EXPECT_EQ(parts_at(found, "optimizer"), std::vector<std::string>{"optimizer_states.0"});
  EXPECT_EQ(parts_at(found, "scheduler"), std::vector<std::string>{"lr_schedulers.0"});
  EXPECT_EQ(parts_at(found, "rng"),
            (std::vector<std::string>{"rng.cpu", "rng.cuda.0", "rng.gen", "rng.numpy", "rng.python"}));
  EXPECT_EQ(parts_at(found, "step"), std::vector<std::string>{"epoch"});
}

TEST(ResumeState, HalfAnOptimizerIsReportedAndTheAdviceFollowsWhatWasFound) {
  ResumeStateTree tree;
  tree.add_value("opt.param_groups", nlohmann::json::array({{{"lr", 0.1}, {"params", {0}}}}));
  auto found = tree.find();
  EXPECT_EQ(parts_at(found, "incomplete_optimizer"), std::vector<std::string>{"opt"});
  EXPECT_FALSE(holds_resume_part(found, "optimizer"));
  std::string advice = optimizer_missing_advice("no optimizer state", found);
  EXPECT_NE(advice.find("at 'opt' lacks"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("--weights-only"), std::string::npos) << advice;

  ResumeStateTree weights;
  weights.add_tensor("fc.weight", DType::kF32, {2, 2});
  weights.add_tensor("step_counts", DType::kI64, {2, 3});
  EXPECT_TRUE(weights.find().empty());
  advice = optimizer_missing_advice("no optimizer state", weights.find());
  EXPECT_NE(advice.find("pass --weights-only"), std::string::npos) << advice;
  // A step counter alone does not make a resume checkpoint: weights-only saves keep one too.
  weights.add_value("global_step", 100);
  EXPECT_EQ(parts_at(weights.find(), "step"), std::vector<std::string>{"global_step"});
  advice = optimizer_missing_advice("no optimizer state", weights.find());
  EXPECT_NE(advice.find("pass --weights-only"), std::string::npos) << advice;
}

TEST(ResumeState, HostileValuesAreWalkedWithinBounds) {
  ResumeStateTree tree;
  nlohmann::json deep = 1;
  for (int i = 0; i < 500; ++i) deep = nlohmann::json::array({deep});
  tree.add_value("deep", deep);
  tree.add_value("fake", {{"__tensor__", "not a tensor"}, {"step", "x"}});
  tree.add_value(std::string(2000, '.'), 1);
  EXPECT_TRUE(tree.find().empty());
}

}  // namespace
}  // namespace ckpt
