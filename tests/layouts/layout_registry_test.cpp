// The layouts registry's conformance suite (layouts/layout_registry.h): every registered layout has
// a fixture, each fixture is claimed by its own layout and by no other, with evidence and its files'
// roles, and a path two layouts claim is refused naming both.
#include "layouts/layout_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "tests/support/layout_fixtures.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

std::string claims_of(const std::vector<LayoutMatch>& claims) {
  std::string out;
  for (const LayoutMatch& m : claims) out += m.layout + " (" + m.evidence + ") ";
  return out;
}

TEST(LayoutRegistry, EveryLayoutHasAFixtureAndEveryFixtureALayout) {
  std::set<std::string> with_fixture;
  for (const LayoutFixture& f : layout_fixtures()) {
    EXPECT_NE(find_layout(f.layout), nullptr) << "fixture of an unregistered layout: " << f.layout;
    with_fixture.insert(f.layout);
  }
  std::set<std::string> names;
  for (const Layout* layout : registered_layouts()) {
    EXPECT_TRUE(names.insert(layout->name()).second) << "registered twice: " << layout->name();
    EXPECT_TRUE(with_fixture.count(layout->name())) << layout->name() << " has no fixture in "
                                                    << "tests/support/layout_fixtures.h";
    EXPECT_NE(std::string(layout->evidence_rule()), "") << layout->name();
    EXPECT_NE(std::string(layout->resume_rule()), "") << layout->name();
    EXPECT_NE(std::string(layout->seal_ranges()), "") << layout->name();
  }
}

TEST(LayoutRegistry, EachFixtureIsClaimedByItsOwnLayoutAloneWithEvidence) {
  TempDir scratch;
  int n = 0;
  for (const LayoutFixture& f : layout_fixtures()) {
    const std::string dir = scratch / std::to_string(n++);
    fs::create_directories(dir);
    const std::string path = f.make(dir);
    if (f.needs_seal) write_file_bytes(path + "/ckptcheck.seal.json", {'{', '}'});
    const std::vector<LayoutMatch> claims = layout_claims(path);
    ASSERT_EQ(claims.size(), 1u) << path << ": " << claims_of(claims);
    const LayoutMatch& m = claims[0];
    EXPECT_EQ(m.layout, f.layout) << path;
    EXPECT_EQ(m.kind, f.kind) << path;
    EXPECT_FALSE(m.evidence.empty()) << path;
    EXPECT_TRUE(m.defect.is_ok()) << path << ": " << m.defect.to_string();
    EXPECT_EQ(!m.given.empty(), f.found_from_above) << path << " -> " << m.dir;
    EXPECT_FALSE(m.files.empty()) << path;
    for (const LayoutFile& file : m.files) EXPECT_FALSE(file.loader.empty()) << path << ": " << file.name;
    auto detected = detect_layout(path);
    ASSERT_TRUE(detected.is_ok()) << detected.status().to_string();
    ASSERT_TRUE(detected->has_value()) << path;
    EXPECT_EQ((*detected)->layout, f.layout) << path;
  }
}

// The trainers' files carry the roles their resume reads them by.
TEST(LayoutRegistry, TrainerFilesCarryTheirRoles) {
  auto m = detect_layout(layout_data("trainers/hf/checkpoint-10"));
  ASSERT_TRUE(m.is_ok() && m->has_value());
  std::set<std::string> roles;
  for (const LayoutFile& f : (*m)->files) roles.insert(std::string(file_role_name(f.role)) + ":" + f.name);
  EXPECT_TRUE(roles.count("optimizer:optimizer.pt")) << claims_of({**m});
  EXPECT_TRUE(roles.count("trainer state:trainer_state.json"));
  EXPECT_TRUE(roles.count("training arguments:training_args.bin"));
}

// A DCP folder holding trainer_state.json is claimed by DCP and by the HF Trainer: refused, naming
// both and their evidence, never opened as whichever was tried first.
TEST(LayoutRegistry, TwoLayoutsClaimingOnePathAreRefusedNamingBoth) {
  TempDir scratch;
  const std::string dir = scratch / "torch113";
  fs::copy(layout_data("dcp/torch113"), dir, fs::copy_options::recursive);
  ASSERT_TRUE(detect_layout(dir).is_ok());
  write_file_bytes(dir + "/trainer_state.json", {'{', '}'});
  const auto refused = detect_layout(dir);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kAmbiguous);
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("dcp (.metadata)"), std::string::npos) << message;
  EXPECT_NE(message.find("hf_trainer (trainer_state.json)"), std::string::npos) << message;
  EXPECT_EQ(message.rfind(dir, 0), 0u) << message;
}

// Precedence that verify always had is evidence, not order: a DCP folder named like ckptcheck's
// step folders is ckptcheck's (uncommitted), and a folder sealed as a folder is no root.
TEST(LayoutRegistry, ExclusionsAreWrittenInTheEvidence) {
  TempDir scratch;
  const std::string step = scratch / "step_00000005";
  fs::copy(layout_data("dcp/torch113"), step, fs::copy_options::recursive);
  auto m = detect_layout(step);
  ASSERT_TRUE(m.is_ok() && m->has_value()) << (m.is_ok() ? "" : m.status().to_string());
  EXPECT_EQ((*m)->layout, "native_checkpoint");
  const std::string root = scratch / "root";
  save_training_state(root, full_training_state());
  m = detect_layout(root);
  ASSERT_TRUE(m.is_ok() && m->has_value());
  EXPECT_EQ((*m)->layout, "native_checkpoint");
  write_file_bytes(root + "/ckptcheck.seal.json", {'{', '}'});
  m = detect_layout(root);
  ASSERT_TRUE(m.is_ok() && m->has_value());
  EXPECT_EQ((*m)->layout, "sealed_directory");
  const auto none = detect_layout(scratch / "nothing-here");
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace ckpt
