// A directory checkpoint is read with its subdirectories: per-rank state kept as rank<r>/state.pt
// is state too, named by its path below the checkpoint ("rank1/state"). A non-tensor value of one
// shape (a Python RNG state's nested lists) is compared number by number.
#include "verifier/tensors/state_snapshot.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

TEST(StateSnapshot, AFileInASubdirectoryIsAComponentNamedByItsPath) {
  testing::TempDir dir;
  dir.write("trainer.json", "{\"step\": 8}");
  std::filesystem::create_directories(dir / "rank1/deeper");
  dir.write("rank1/state.json", "{\"cursor\": 96}");
  dir.write("rank1/deeper/more.json", "{\"x\": 1}");
  auto s = read_state_snapshot(dir.path());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(s->values.count("rank1/state.cursor"), 1u);
  EXPECT_EQ(s->values.at("rank1/state.cursor").component, "rank1/state");
  EXPECT_EQ(s->values.at("rank1/state.cursor").value, 96);
  EXPECT_EQ(s->values.at("rank1/deeper/more.x").component, "rank1/deeper/more");
  EXPECT_EQ(s->values.at("trainer.step").component, "trainer");
}

TEST(StateSnapshot, ValuesOfOneShapeCompareNumberByNumber) {
  StateSnapshot reference, resumed;
  reference.values["rank_0.random"] = {"rank_0", nlohmann::json::parse("[3, [1, 2, 3], null]")};
  resumed.values["rank_0.random"] = {"rank_0", nlohmann::json::parse("[3, [1, 2, 7], null]")};
  const ComponentDiff d = compare_snapshots(reference, resumed, Tolerance{}).at("rank_0");
  EXPECT_FALSE(d.passed);
  EXPECT_EQ(d.incomparable, 0) << "numbers that differ are comparable: a noise envelope may excuse them";
  EXPECT_EQ(d.max_abs, 4);
  EXPECT_EQ(d.elements, 4);
  EXPECT_EQ(d.divergence_message(), "rank_0 diverged: rank_0.random number 3 of 4 is 7, reference 3");
  EXPECT_TRUE(compare_snapshots(reference, resumed, Tolerance{0, 5}).at("rank_0").passed);
  resumed.values["rank_0.random"].value = nlohmann::json::parse("[3, [1, 2], null]");
  const ComponentDiff shape = compare_snapshots(reference, resumed, Tolerance{0, 5}).at("rank_0");
  EXPECT_FALSE(shape.passed);
  EXPECT_EQ(shape.incomparable, 1);
}

}  // namespace
}  // namespace ckpt
