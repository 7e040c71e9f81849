// A directory checkpoint is read with its subdirectories: per-rank state kept as rank<r>/state.pt
// is state too, named by its path below the checkpoint ("rank1/state").
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

}  // namespace
}  // namespace ckpt
