#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "fixtures/trainer.h"

namespace ckpt {
namespace {

const std::string kConfigDir = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs";

PilotConfig pilot(const std::string& file = "pilot.yaml") {
  Result<PilotConfig> c = load_pilot_config(kConfigDir + "/" + file);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : PilotConfig{};
}

std::unique_ptr<Trainer> make_trainer(const PilotConfig& config) {
  Result<std::unique_ptr<Trainer>> t = Trainer::create(config);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

std::vector<double> train(Trainer& t, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(t.train_step().loss);
  return losses;
}

std::map<std::string, at::Tensor> as_map(const TrainingState& state) {
  std::map<std::string, at::Tensor> m;
  for (const StateTensor& s : state) m[s.name] = s.tensor;
  return m;
}

const StateTensor* find(const TrainingState& state, const std::string& name) {
  for (const StateTensor& s : state) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Names of the state tensors that differ (dtype, shape or any bit).
std::vector<std::string> differing(const TrainingState& a, const TrainingState& b) {
  std::vector<std::string> out;
  std::map<std::string, at::Tensor> bm = as_map(b);
  for (const StateTensor& s : a) {
    auto it = bm.find(s.name);
    if (it == bm.end() || s.tensor.scalar_type() != it->second.scalar_type() ||
        !at::equal(s.tensor, it->second)) {
      out.push_back(s.name);
    }
  }
  if (a.size() != b.size()) out.push_back("<count>");
  return out;
}

// The reference: 6 uninterrupted steps, with the state exported after step 3 on the way (export
// only copies, so the run is still uninterrupted). Computed once per process: every restore test
// resumes from the step-3 state and compares against steps 4-6.
struct Uninterrupted {
  std::vector<double> losses;
  TrainingState state_after_3;
  TrainingState state;
};
const Uninterrupted& uninterrupted() {
  static const Uninterrupted ref = [] {
    Uninterrupted r;
    std::unique_ptr<Trainer> t = make_trainer(pilot());
    r.losses = train(*t, 3);
    r.state_after_3 = t->export_state();
    for (double l : train(*t, 3)) r.losses.push_back(l);
    r.state = t->export_state();
    return r;
  }();
  return ref;
}

// A fresh trainer imports the step-3 state with `faults` and trains 3 more.
struct Resumed {
  std::vector<double> losses;  // steps 4-6
  TrainingState state;
};
Resumed resume_after_3(const RestoreFaults& faults) {
  Resumed r;
  std::unique_ptr<Trainer> second = make_trainer(pilot());
  Status s = second->import_state(as_map(uninterrupted().state_after_3), faults);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(second->global_step(), 3);
  r.losses = train(*second, 3);
  r.state = second->export_state();
  return r;
}

TEST(Trainer, SameConfigGivesBitIdenticalLosses) {
  std::unique_ptr<Trainer> t = make_trainer(pilot());
  std::vector<double> again = train(*t, 6);
  const std::vector<double>& ref = uninterrupted().losses;
  ASSERT_EQ(again.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(again[i], ref[i]) << "step " << i;
  for (double l : ref) EXPECT_TRUE(std::isfinite(l));
  // Losses start near ln(vocab) and the model is learning something within six steps.
  EXPECT_GT(ref[0], 3.0);
  EXPECT_LT(ref[5], ref[0]);
  EXPECT_EQ(t->global_step(), 6);
}

TEST(Trainer, StepMetricsDescribeTheStep) {
  PilotConfig c = pilot();
  std::unique_ptr<Trainer> t = make_trainer(c);
  auto wall_start = std::chrono::steady_clock::now();
  StepMetrics m = t->train_step();
  double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start).count();
  std::cout << "pilot train_step: " << m.step_ms << " ms (wall " << wall_ms << " ms)\n";
  EXPECT_EQ(m.step, 1);
  EXPECT_DOUBLE_EQ(m.lr, 3e-3 / 4);  // warmup step 1 of 4
  EXPECT_EQ(m.loss_scale, 65536.0);
  EXPECT_EQ(m.tokens, 2 * 8 * 64);
  EXPECT_FALSE(m.skipped);
  EXPECT_GT(m.grad_norm, 0);
  EXPECT_GT(m.step_ms, 0);
  EXPECT_GE(m.step_ms, m.forward_backward_ms + m.optimizer_ms);
  for (int i = 0; i < 3; ++i) t->train_step();
  // Four finite steps make the scale grow once (growth_interval 4).
  EXPECT_EQ(t->train_step().loss_scale, 131072.0);
}

TEST(Trainer, ExportHasTheDocumentedNamesAndDtypes) {
  std::unique_ptr<Trainer> t = make_trainer(pilot());
  TrainingState s = t->export_state();
  struct Expect {
    const char* name;
    const char* component;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Expect> expected = {
      {"model.blocks.0.attn.w_qkv", "model", at::kFloat, {192, 64}},
      {"model.blocks.1.mlp.w_in", "model", at::kFloat, {256, 64}},
      {"model.pos_emb", "model", at::kFloat, {64, 64}},
      {"model.causal_mask", "model", at::kBool, {64, 64}},
      {"optimizer.model.blocks.0.attn.w_qkv.exp_avg", "optimizer", at::kFloat, {192, 64}},
      {"optimizer.model.lm_head.step", "optimizer", at::kLong, {}},
      {"scheduler.last_step", "scheduler", at::kLong, {}},
      {"scheduler.base_lr", "scheduler", at::kDouble, {}},
      {"scheduler.last_lr", "scheduler", at::kDouble, {}},
      {"scaler.scale", "scaler", at::kDouble, {}},
      {"scaler.growth_factor", "scaler", at::kDouble, {}},
      {"scaler.backoff_factor", "scaler", at::kDouble, {}},
      {"scaler.growth_interval", "scaler", at::kLong, {}},
      {"scaler.growth_tracker", "scaler", at::kLong, {}},
      {"data.epoch", "data", at::kLong, {}},
      {"data.cursor", "data", at::kLong, {}},
      {"data.shuffle_seed", "data", at::kLong, {}},
      {"progress.global_step", "progress", at::kLong, {}},
      {"progress.skipped_steps", "progress", at::kLong, {}},
  };
  for (const Expect& e : expected) {
    const StateTensor* st = find(s, e.name);
    ASSERT_NE(st, nullptr) << e.name;
    EXPECT_EQ(st->component, e.component) << e.name;
    EXPECT_EQ(st->tensor.scalar_type(), e.dtype) << e.name;
    EXPECT_TRUE(st->tensor.is_contiguous()) << e.name;
    EXPECT_EQ(st->tensor.sizes().vec(), e.shape) << e.name;
  }
  const StateTensor* lm_head = find(s, "model.lm_head");
  ASSERT_NE(lm_head, nullptr);
  const StateTensor* lm_head_sq = find(s, "optimizer.model.lm_head.exp_avg_sq");
  ASSERT_NE(lm_head_sq, nullptr);
  EXPECT_EQ(lm_head_sq->tensor.sizes(), lm_head->tensor.sizes());
  EXPECT_EQ(lm_head_sq->tensor.scalar_type(), at::kFloat);
  const StateTensor* rng = find(s, "rng.cpu_state");
  ASSERT_NE(rng, nullptr);
  EXPECT_EQ(rng->tensor.scalar_type(), at::kByte);
  EXPECT_EQ(rng->tensor.dim(), 1);
  EXPECT_EQ(find(s, "data.shuffle_seed")->tensor.item<int64_t>(), 1234);
  // Every trainable parameter has its three optimizer entries; the buffer has none.
  int params = 0, optimizer_entries = 0;
  for (const StateTensor& st : s) {
    if (st.component == "model" && st.name != "model.causal_mask") ++params;
    if (st.component == "optimizer") ++optimizer_entries;
  }
  EXPECT_EQ(params, 2 + 2 * 12 + 3);
  EXPECT_EQ(optimizer_entries, 3 * params);
  EXPECT_EQ(find(s, "optimizer.model.causal_mask.exp_avg"), nullptr);
}

TEST(Trainer, ResumeAfterThreeStepsMatchesUninterruptedBitForBit) {
  Resumed r = resume_after_3({});
  const Uninterrupted& ref = uninterrupted();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.losses[i], ref.losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(differing(r.state, ref.state), std::vector<std::string>{});
}

TEST(Trainer, EachRestoreFaultChangesWhatItTargets) {
  struct Case {
    bool RestoreFaults::*fault;
    std::vector<std::string> changed;  // state tensors that must end up different
    bool changes_losses;
  };
  // In fp32 a power-of-two loss scale cancels exactly, so a reset scaler shows only in its state.
  const std::vector<Case> cases = {
      {&RestoreFaults::skip_rng_restore, {"rng.cpu_state"}, true},
      {&RestoreFaults::drop_optimizer_state,
       {"optimizer.model.tok_emb.exp_avg", "optimizer.model.tok_emb.step"},
       true},
      {&RestoreFaults::reset_scheduler, {"scheduler.last_step", "scheduler.last_lr"}, true},
      {&RestoreFaults::skip_data_position, {"data.cursor"}, true},
      {&RestoreFaults::reset_loss_scaler, {"scaler.scale", "scaler.growth_tracker"}, false},
  };
  const Uninterrupted& ref = uninterrupted();
  for (const Case& c : cases) {
    RestoreFaults faults;
    faults.*c.fault = true;
    Resumed r = resume_after_3(faults);
    std::vector<std::string> d = differing(r.state, ref.state);
    for (const std::string& name : c.changed) {
      EXPECT_NE(std::find(d.begin(), d.end(), name), d.end())
          << name << " unchanged; differing: " << ::testing::PrintToString(d);
    }
    bool losses_differ = false;
    for (int i = 0; i < 3; ++i) losses_differ = losses_differ || r.losses[i] != ref.losses[3 + i];
    EXPECT_EQ(losses_differ, c.changes_losses) << c.changed[0];
  }
}

TEST(Trainer, SkippedComponentsMayBeAbsent) {
  std::unique_ptr<Trainer> t = make_trainer(pilot());
  std::map<std::string, at::Tensor> saved = as_map(t->export_state());
  for (auto it = saved.begin(); it != saved.end();) {
    it = it->first.rfind("optimizer.", 0) == 0 ? saved.erase(it) : std::next(it);
  }
  Status missing = t->import_state(saved);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("optimizer.model."), std::string::npos) << missing.message();
  RestoreFaults f;
  f.drop_optimizer_state = true;
  EXPECT_TRUE(t->import_state(saved, f).is_ok());
}

TEST(Trainer, ImportRejectsWrongShapeAndDtypeNamingTheTensor) {
  std::unique_ptr<Trainer> t = make_trainer(pilot());
  const TrainingState before = t->export_state();
  std::map<std::string, at::Tensor> saved = as_map(before);
  std::map<std::string, at::Tensor> bad = saved;
  bad["model.blocks.1.attn.w_out"] = at::zeros({64, 63});
  Status s = t->import_state(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.blocks.1.attn.w_out"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[64, 64]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[64, 63]"), std::string::npos) << s.message();
  bad = saved;
  bad["scheduler.last_step"] = at::scalar_tensor(3.0, at::kDouble);
  s = t->import_state(bad);
  EXPECT_NE(s.message().find("scheduler.last_step"), std::string::npos) << s.message();
  bad = saved;
  bad["data.cursor"] = at::scalar_tensor(int64_t{1} << 40, at::kLong);
  s = t->import_state(bad);
  EXPECT_NE(s.message().find("data.cursor"), std::string::npos) << s.message();
  // A failed import changed nothing.
  EXPECT_EQ(differing(t->export_state(), before), std::vector<std::string>{});
}

TEST(Trainer, MeasuredStepReportsMemory) {
  std::unique_ptr<Trainer> t = make_trainer(pilot());
  StepMemory mem;
  StepMetrics m = t->measured_step(&mem);
  EXPECT_EQ(m.step, 1);
  EXPECT_EQ(t->global_step(), 1);
  EXPECT_GT(mem.peak_rss_bytes, 0);
  EXPECT_GT(mem.rss_before_bytes, 0);
  EXPECT_GE(mem.peak_rss_bytes, mem.rss_before_bytes);
  int64_t param_bytes = 0, n_params = 0;
  for (const StateTensor& s : t->export_state()) {
    if (s.component == "model" && s.name != "model.causal_mask") {
      param_bytes += static_cast<int64_t>(s.tensor.nbytes());
      ++n_params;
    }
  }
  EXPECT_EQ(mem.parameter_bytes, param_bytes);
  EXPECT_EQ(mem.gradient_bytes, param_bytes);
  EXPECT_EQ(mem.optimizer_state_bytes, 2 * param_bytes + n_params * 8);
  EXPECT_GE(mem.activation_bytes_estimate, 0);
}

TEST(Trainer, EvaluateIsDeterministicAndDoesNotDisturbTraining) {
  std::unique_ptr<Trainer> t = make_trainer(pilot());
  train(*t, 2);
  EvalResult a = t->evaluate();
  EvalResult b = t->evaluate();
  EXPECT_EQ(a.logits_sha256, b.logits_sha256);
  EXPECT_EQ(a.logits.sizes().vec(), (std::vector<int64_t>{2 * 8, 64, a.logits.size(2)}));
  EXPECT_EQ(a.logits.scalar_type(), at::kFloat);
  EXPECT_TRUE(std::isfinite(a.mean_loss));
  std::vector<double> rest = train(*t, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rest[i], uninterrupted().losses[2 + i]) << "step " << 2 + i;
  EXPECT_NE(t->evaluate().logits_sha256, a.logits_sha256);  // the model moved
}

TEST(Trainer, Bf16TrainsWithFiniteLoss) {
  PilotConfig c = pilot("pilot-bf16.yaml");
  std::unique_ptr<Trainer> t = make_trainer(c);
  ASSERT_NE(t, nullptr);
  std::vector<double> losses = train(*t, 3);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NE(losses[0], uninterrupted().losses[0]);  // autocast really changed the arithmetic
  EXPECT_NEAR(losses[0], uninterrupted().losses[0], 0.1);
  EvalResult e = t->evaluate();
  EXPECT_EQ(e.logits.scalar_type(), at::kFloat);
  EXPECT_TRUE(std::isfinite(e.mean_loss));
}

TEST(Trainer, CreateRejectsWhatItCannotRun) {
  PilotConfig c = pilot();
  c.data.sha256 = std::string(64, 'b');
  Result<std::unique_ptr<Trainer>> t = Trainer::create(c);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("data.sha256"), std::string::npos);
  c = pilot();
  c.strategy = "fsdp";
  EXPECT_EQ(Trainer::create(c).status().code(), StatusCode::kNotSupported);
}

}  // namespace
}  // namespace ckpt
