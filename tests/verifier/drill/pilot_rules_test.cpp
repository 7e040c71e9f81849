#include "verifier/drill/pilot_rules.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

// Temp YAMLs made from the shipped pilot, with the data path made absolute so they load anywhere.
class PilotRulesTest : public ::testing::Test {
 protected:
  std::string yaml(const std::string& name, const std::vector<std::pair<std::string, std::string>>& edits) {
    std::ifstream in(std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs/pilot.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    edits_applied_ = 0;
    auto replace = [&](const std::string& from, const std::string& to) {
      const size_t at = text.find(from);
      if (at == std::string::npos) return;
      text.replace(at, from.size(), to);
      ++edits_applied_;
    };
    replace("path: ../data/corpus.txt",
            std::string("path: ") + CKPTCHECK_SOURCE_DIR + "/fixtures/data/corpus.txt");
    for (const auto& [from, to] : edits) replace(from, to);
    EXPECT_EQ(edits_applied_, edits.size() + 1) << "pilot.yaml changed; update the test's edits";
    const std::string path = tmp_ / (name + ".yaml");
    std::ofstream(path) << text;
    return path;
  }
  PilotConfig load(const std::string& path) {
    auto c = load_pilot_config(path, /*check_data=*/false);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? *c : PilotConfig{};
  }
  testing::TempDir tmp_;
  size_t edits_applied_ = 0;
};

TEST_F(PilotRulesTest, AFaithfulPilotPasses) {
  const PilotConfig pilot = load(yaml("pilot", {}));
  const PilotConfig long_run =
      load(yaml("long", {{"seq_len: 64", "seq_len: 64"}, {"steps: 16", "steps: 1000"}}));
  EXPECT_TRUE(pilot_rule_violations(pilot, long_run).empty());
  EXPECT_TRUE(check_pilot_rules(pilot, long_run).is_ok());
}

TEST_F(PilotRulesTest, RefusesEachHidingDifferenceByKey) {
  const PilotConfig pilot =
      load(yaml("pilot", {{"save_optimizer_state: true", "save_optimizer_state: false"}}));
  const PilotConfig long_run =
      load(yaml("long", {{"seq_len: 64", "seq_len: 256"}, {"micro_batch: 8", "micro_batch: 16"}}));
  const auto v = pilot_rule_violations(pilot, long_run);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].key, "save_optimizer_state");
  EXPECT_EQ(v[1].key, "seq_len");
  EXPECT_EQ(v[1].detail, "pilot 64 < long run 256");
  EXPECT_EQ(v[2].key, "micro_batch");
  const Status s = check_pilot_rules(pilot, long_run);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const char* key : {"save_optimizer_state", "seq_len", "micro_batch", "pilot.yaml", "long.yaml"})
    EXPECT_NE(s.message().find(key), std::string::npos) << key << " in: " << s.message();
}

TEST_F(PilotRulesTest, ALongerPilotIsFine) {
  // Only a *shorter* geometry hides memory; a pilot at least as large as the long run is honest.
  const PilotConfig pilot = load(yaml("pilot", {{"micro_batch: 8", "micro_batch: 32"}}));
  const PilotConfig long_run = load(yaml("long", {}));
  EXPECT_TRUE(pilot_rule_violations(pilot, long_run).empty());
}

}  // namespace
}  // namespace ckpt
