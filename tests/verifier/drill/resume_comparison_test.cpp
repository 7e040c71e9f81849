// The final state's rules, on snapshots built in memory: the control run decides what the resumed
// run must hold (absent as in the control passes, state the control holds and the resumed run lost
// fails, state only the resumed run holds fails, state new at the resumed world size is held with
// the control's layout), whatever the components are named; what the reference and the control
// both hold is compared bit-exact, within the tolerance or within the envelope; every component
// carries the rule that judged it.
#include "verifier/drill/resume_comparison.h"

#include <gtest/gtest.h>

#include "tests/support/test_support.h"
#include "verifier/drill/control_presence.h"

namespace ckpt {
namespace {

StateSnapshot snapshot(std::map<std::string, nlohmann::json> values) {
  StateSnapshot s;
  for (auto& [name, v] : values) s.values[name] = {name.substr(0, name.find('.')), v, nullptr};
  return s;
}

struct Judged {
  DrillRecord record;
  std::map<std::string, ComponentDiff> components;
  bool identical = false;
};

Judged judge(const StateSnapshot& golden, const StateSnapshot& resumed, const StateSnapshot* control,
             const NoiseEnvelope* envelope = nullptr, Tolerance tolerance = {}) {
  Judged j;
  ResumeComparison c;
  c.tolerance = tolerance;
  c.envelope = envelope;
  c.control_state = control;
  c.resumed_world_size = 1;
  j.identical = check_final_state(j.record, "after-save", c, golden, resumed, 0, &j.components);
  return j;
}

const DrillCheck& final_state(const Judged& j) {
  EXPECT_FALSE(j.record.out.checks.empty());
  return j.record.out.checks.back();
}

TEST(FinalStateRules, WithoutAControlEveryComponentIsComparedWithTheReference) {
  const StateSnapshot s = snapshot({{"model.w", 1.5}, {"trainer.step", 8}});
  const Judged j = judge(s, s, nullptr);
  EXPECT_TRUE(j.identical);
  EXPECT_EQ(j.components.at("model").rule, "bit-exact");
  EXPECT_EQ(final_state(j).detail, "2 components match, all bit-exact");
  EXPECT_EQ(final_state(j).numbers["rules"]["trainer"], "bit-exact");
}

TEST(FinalStateRules, PerRankStateTheControlLacksIsAbsentAsInTheControlWhateverItsName) {
  for (const std::string rank1 : {"rank_1", "random_states_1", "rng_state_1", "rank1/state", "zzz"}) {
    const StateSnapshot golden = snapshot({{"model.w", 1.5}, {"rank_0.rng", 7}, {rank1 + ".rng", 9}});
    const StateSnapshot at_one_rank = snapshot({{"model.w", 1.5}, {"rank_0.rng", 7}});
    const Judged j = judge(golden, at_one_rank, &at_one_rank);
    ASSERT_TRUE(final_state(j).passed) << rank1 << ": " << final_state(j).detail;
    EXPECT_FALSE(j.identical) << "the reference held state the resumed run does not: not bit for bit";
    const ComponentDiff& gone = j.components.at(rank1);
    EXPECT_EQ(gone.rule, "absent-as-in-control");
    EXPECT_EQ(gone.note,
              "absent at world size 1, as in an uninterrupted run (the reference held 1 tensor or value)");
    EXPECT_EQ(j.components.at("rank_0").rule, "bit-exact");
    EXPECT_TRUE(j.record.out.failures.empty());
  }
}

TEST(FinalStateRules, WithoutTheControlTheSameMissingStateFails) {
  const StateSnapshot golden = snapshot({{"model.w", 1.5}, {"rank_1.rng", 9}});
  const StateSnapshot resumed = snapshot({{"model.w", 1.5}});
  const Judged j = judge(golden, resumed, nullptr);
  EXPECT_FALSE(final_state(j).passed);
  ASSERT_EQ(j.record.out.failures.size(), 1u);
  EXPECT_EQ(j.record.out.failures[0],
            "rank_1 diverged: rank_1.rng missing in the resumed run [bit-exact] (after-save kill)");
}

TEST(FinalStateRules, StateTheControlHoldsAndTheResumedRunLostFails) {
  const StateSnapshot golden = snapshot({{"model.w", 1.5}, {"rank_0.rng", 7}, {"rank_1.rng", 9}});
  const StateSnapshot control = snapshot({{"model.w", 1.5}, {"rank_0.rng", 7}});
  const StateSnapshot resumed = snapshot({{"model.w", 1.5}});
  const Judged j = judge(golden, resumed, &control);
  EXPECT_FALSE(final_state(j).passed);
  ASSERT_EQ(j.record.out.failures.size(), 1u) << final_state(j).detail;
  EXPECT_EQ(
      j.record.out.failures[0],
      "rank_0 diverged: rank_0.rng missing in the resumed run, which an uninterrupted run at world size 1 "
      "holds (the control run) [held-as-in-control] (after-save kill)");
  EXPECT_EQ(j.components.at("rank_1").rule, "absent-as-in-control");
}

TEST(FinalStateRules, StateOnlyTheResumedRunHoldsFails) {
  const StateSnapshot golden = snapshot({{"model.w", 1.5}, {"rank_1.rng", 9}});
  const StateSnapshot control = snapshot({{"model.w", 1.5}});
  const StateSnapshot resumed = snapshot({{"model.w", 1.5}, {"rank_1.rng", 9}});
  const Judged j = judge(golden, resumed, &control);
  EXPECT_FALSE(final_state(j).passed);
  EXPECT_EQ(j.components.at("rank_1").rule, "absent-as-in-control");
  EXPECT_NE(
      j.components.at("rank_1").divergence_message().find(
          "only in the resumed run: an uninterrupted run at world size 1 (the control run) does not hold it"),
      std::string::npos);
}

TEST(FinalStateRules, StateNewAtTheResumedWorldSizeIsHeldWithTheControlsLayout) {
  const StateSnapshot golden = snapshot({{"model.w", 1.5}});
  const StateSnapshot control = snapshot({{"model.w", 1.5}, {"rank_1.rng", 9}, {"rank_1.cursor", 48}});
  const StateSnapshot resumed = snapshot({{"model.w", 1.5}, {"rank_1.rng", 11}, {"rank_1.cursor", 48}});
  const Judged j = judge(golden, resumed, &control);
  ASSERT_TRUE(final_state(j).passed) << final_state(j).detail;
  const ComponentDiff& grown = j.components.at("rank_1");
  EXPECT_EQ(grown.rule, "held-as-in-control");
  EXPECT_FALSE(grown.bit_identical);
  EXPECT_NE(grown.note.find("values are not compared"), std::string::npos) << grown.note;
  // Missing, or another kind of value, fails.
  const Judged lost = judge(golden, snapshot({{"model.w", 1.5}, {"rank_1.rng", 11}}), &control);
  EXPECT_FALSE(final_state(lost).passed);
  EXPECT_EQ(lost.components.at("rank_1").rule, "held-as-in-control");
  const Judged other =
      judge(golden, snapshot({{"model.w", 1.5}, {"rank_1.rng", "x"}, {"rank_1.cursor", 48}}), &control);
  EXPECT_FALSE(final_state(other).passed);
  // A tensor: its dtype and shape are the control's, its bytes may differ.
  StateSnapshot control_tensor = golden, resumed_tensor = golden;
  control_tensor.tensors = {testing::patterned_tensor("rank_1.rng", "rank_1", DType::kU8, {16})};
  LoadedTensor flipped = testing::patterned_tensor("rank_1.rng", "rank_1", DType::kU8, {16});
  flipped.bytes[3] ^= 1;
  resumed_tensor.tensors = {flipped};
  EXPECT_TRUE(final_state(judge(golden, resumed_tensor, &control_tensor)).passed);
  resumed_tensor.tensors = {testing::patterned_tensor("rank_1.rng", "rank_1", DType::kF32, {4})};
  const Judged retyped = judge(golden, resumed_tensor, &control_tensor);
  ASSERT_FALSE(final_state(retyped).passed);
  EXPECT_EQ(retyped.components.at("rank_1").divergence_message(),
            "rank_1 diverged: rank_1.rng dtype U8 vs F32 (the control run's, then the resumed run's)");
}

TEST(FinalStateRules, OneComponentHoldingATensorPerRankSplitsTheSameWay) {
  // The built-in workload's `rng`: rng.cpu_state.rank0 and rng.cpu_state.rank1 in one component.
  StateSnapshot golden, control;
  golden.tensors = {testing::patterned_tensor("rng.cpu_state.rank0", "rng", DType::kU8, {16}),
                    testing::patterned_tensor("rng.cpu_state.rank1", "rng", DType::kU8, {16})};
  control.tensors = {golden.tensors[0]};
  const Judged j = judge(golden, control, &control);
  ASSERT_TRUE(final_state(j).passed) << final_state(j).detail;
  EXPECT_EQ(j.components.at("rng").rule, "bit-exact");
  EXPECT_NE(j.components.at("rng").note.find("1 tensor or value of the reference's absent at world size 1"),
            std::string::npos)
      << j.components.at("rng").note;
}

TEST(FinalStateRules, ANumberOutsideTheToleranceButWithinTheEnvelopePassesByTheEnvelope) {
  const StateSnapshot golden = snapshot({{"rank_0.cursor", 80}, {"rank_0.name", "a"}});
  NoiseEnvelope envelope;
  envelope.components["rank_0"] = 40;
  const Judged j =
      judge(golden, snapshot({{"rank_0.cursor", 120}, {"rank_0.name", "a"}}), &golden, &envelope);
  ASSERT_TRUE(final_state(j).passed) << final_state(j).detail;
  EXPECT_EQ(j.components.at("rank_0").rule, "envelope");
  // A value of another kind is no noise: no envelope excuses it.
  const Judged other =
      judge(golden, snapshot({{"rank_0.cursor", 80}, {"rank_0.name", "b"}}), &golden, &envelope);
  EXPECT_FALSE(final_state(other).passed);
  EXPECT_EQ(other.components.at("rank_0").rule, "envelope");
  // Past the envelope: fails, by the envelope.
  const Judged far =
      judge(golden, snapshot({{"rank_0.cursor", 500}, {"rank_0.name", "a"}}), &golden, &envelope);
  EXPECT_FALSE(final_state(far).passed);
}

TEST(FinalStateRules, TheNoiseIsMeasuredOnWhatBothUninterruptedRunsHold) {
  DrillRecord record;
  const StateSnapshot two_ranks = snapshot({{"model.w", 1.5}, {"rank_1.rng", 9}});
  const StateSnapshot one_rank = snapshot({{"model.w", 1.5}});
  const NoiseEnvelope noise = measure_noise(record, {}, two_ranks, {}, one_rank, 4, "two uninterrupted runs");
  ASSERT_EQ(record.out.checks.size(), 1u);
  EXPECT_EQ(record.out.checks[0].numbers["bit_identical"], true) << record.out.checks[0].detail;
  EXPECT_EQ(noise.components.count("rank_1"), 0u);
}

TEST(ControlPresence, SplitsByNameSetsNotByNames) {
  const StateSnapshot golden = snapshot({{"a.x", 1}, {"b.x", 2}, {"c.x", 3}});
  const StateSnapshot control = snapshot({{"a.x", 1}, {"d.x", 4}});
  const StateSnapshot resumed = snapshot({{"a.x", 1}, {"d.x", 5}, {"e.x", 6}, {"b.x", 2}});
  const ControlPresence p = split_by_control(golden, control, resumed);
  EXPECT_EQ(p.golden.values.size(), 1u);
  EXPECT_EQ(p.resumed.values.size(), 1u);
  EXPECT_EQ(p.control_only.values.count("d.x"), 1u);
  EXPECT_EQ(p.resumed_control_only.values.at("d.x").value, 5);
  EXPECT_EQ(p.resumed_extra.values.size(), 2u);  // e.x, and b.x: the control lacks it
  ASSERT_EQ(p.absent.size(), 1u);
  EXPECT_EQ(p.absent.at("c"), std::vector<std::string>{"c.x"});
}

}  // namespace
}  // namespace ckpt
