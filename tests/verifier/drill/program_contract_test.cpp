#include "verifier/drill/program_contract.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

ProgramRun sample(const std::string& resume) {
  ProgramRun r;
  r.role = "resumed";
  r.ckpt_dir = "/w/ckpt";
  r.steps = 16;
  r.save_every = 4;
  r.metrics = "/w/m.jsonl";
  r.resume = resume;
  return r;
}

TEST(ProgramContract, EnvironmentNamesEveryValueAndResumeOnlyOnARelaunch) {
  EXPECT_EQ(
      contract_environment(sample("")),
      (std::vector<std::string>{"CKPTCHECK_CKPT_DIR=/w/ckpt", "CKPTCHECK_STEPS=16", "CKPTCHECK_SAVE_EVERY=4",
                                "CKPTCHECK_METRICS=/w/m.jsonl", "CKPTCHECK_ROLE=resumed"}));
  const auto env = contract_environment(sample("/w/ckpt/step_8"));
  ASSERT_EQ(env.size(), 6u);
  EXPECT_EQ(env.back(), "CKPTCHECK_RESUME=/w/ckpt/step_8");
}

TEST(ProgramContract, PlaceholdersAreReplacedEverywhereInAnArgument) {
  const auto args = substitute_placeholders(
      {"train.py", "--out={ckpt_dir}", "--steps", "{steps}", "{save_every}/{save_every}", "--log",
       "{metrics}", "--resume={resume}", "{unknown}"},
      sample("/w/ckpt/step_8"));
  EXPECT_EQ(args, (std::vector<std::string>{"train.py", "--out=/w/ckpt", "--steps", "16", "4/4", "--log",
                                            "/w/m.jsonl", "--resume=/w/ckpt/step_8", "{unknown}"}));
  EXPECT_EQ(substitute_placeholders({"--resume={resume}"}, sample(""))[0], "--resume=");
}

}  // namespace
}  // namespace ckpt
