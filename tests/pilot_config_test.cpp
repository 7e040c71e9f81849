#include "fixtures/pilot_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "formats/file_io.h"

namespace ckpt {
namespace {

const std::string kConfigDir = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs";
const std::string kCorpusSha = "3972dc9744f6499f0f9b2dbf76696f2ae7ad8af9b23dde66d6af86c9dfb36986";

// Writes configs into a scratch copy of the layout (configs/ beside data/corpus.txt, a link to
// the real corpus), so the shipped relative path ../data/corpus.txt resolves as it does in-tree.
class PilotConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot_config_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    std::filesystem::create_directories(root_ + "/configs");
    std::filesystem::create_directories(root_ + "/data");
    std::filesystem::create_symlink(std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/data/corpus.txt",
                                    root_ + "/data/corpus.txt");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string write_config(const std::string& text) {
    path_ = root_ + "/configs/test.yaml";
    std::ofstream(path_) << text;
    return path_;
  }
  // The shipped pilot with one line replaced.
  std::string pilot_with(const std::string& from, const std::string& to) {
    Result<std::string> text = read_small_file(kConfigDir + "/pilot.yaml", 1 << 20);
    EXPECT_TRUE(text.is_ok());
    std::string s = *text;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  }
  Status load_error(const std::string& text, bool check_data = true) {
    Result<PilotConfig> c = load_pilot_config(write_config(text), check_data);
    EXPECT_FALSE(c.is_ok()) << text;
    return c.is_ok() ? Status::ok() : c.status();
  }
  std::string root_;
  std::string path_;
};

TEST_F(PilotConfigTest, ShippedPilotLoadsWithItsValues) {
  Result<PilotConfig> c = load_pilot_config(kConfigDir + "/pilot.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->name, "pilot");
  EXPECT_EQ(c->model.d_model, 64);
  EXPECT_EQ(c->model.n_layers, 2);
  EXPECT_EQ(c->model.n_heads, 4);
  EXPECT_EQ(c->model.d_ff, 256);
  EXPECT_DOUBLE_EQ(c->model.dropout, 0.1);
  EXPECT_EQ(c->seq_len, 64);
  EXPECT_EQ(c->micro_batch, 8);
  EXPECT_EQ(c->grad_accum, 2);
  EXPECT_DOUBLE_EQ(c->optimizer.lr, 3e-3);
  EXPECT_DOUBLE_EQ(c->optimizer.eps, 1e-8);
  EXPECT_EQ(c->scheduler.total_steps, 64);
  EXPECT_TRUE(c->loss_scaler.enabled);
  EXPECT_DOUBLE_EQ(c->loss_scaler.init_scale, 65536.0);
  EXPECT_EQ(c->loss_scaler.growth_interval, 4);
  EXPECT_EQ(c->data.sha256, kCorpusSha);
  EXPECT_EQ(c->data.shuffle_seed, 1234u);
  EXPECT_EQ(c->seed, 42u);
  EXPECT_EQ(c->steps, 16);
  EXPECT_EQ(c->precision, "fp32");
  // data.path is resolved against the YAML's directory, and pinned as written.
  EXPECT_EQ(c->data.path.front(), '/');
  EXPECT_NE(c->data.path.find("/fixtures/data/corpus.txt"), std::string::npos) << c->data.path;
  EXPECT_TRUE(path_exists(c->data.path));
  EXPECT_EQ(c->resolved()["data"]["path"], "../data/corpus.txt");
}

TEST_F(PilotConfigTest, OtherShippedConfigsLoad) {
  Result<PilotConfig> bf16 = load_pilot_config(kConfigDir + "/pilot-bf16.yaml");
  ASSERT_TRUE(bf16.is_ok()) << bf16.status().to_string();
  EXPECT_EQ(bf16->precision, "bf16");
  Result<PilotConfig> long_run = load_pilot_config(kConfigDir + "/long-run.yaml");
  ASSERT_TRUE(long_run.is_ok()) << long_run.status().to_string();
  EXPECT_EQ(long_run->seq_len, 256);
  EXPECT_EQ(long_run->micro_batch, 16);
  EXPECT_EQ(long_run->steps, 100000);
  EXPECT_EQ(long_run->model.d_model, 64);
}

TEST_F(PilotConfigTest, DefaultsFillEverythingButTheData) {
  Result<PilotConfig> c =
      load_pilot_config(write_config("data:\n  path: ../data/corpus.txt\n  sha256: " + kCorpusSha + "\n"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  PilotConfig defaults;
  EXPECT_EQ(c->model.d_ff, defaults.model.d_ff);
  EXPECT_EQ(c->optimizer.lr, defaults.optimizer.lr);
  EXPECT_EQ(c->strategy, "single");
}

TEST_F(PilotConfigTest, MissingSha256NamesTheKey) {
  Status s = load_error("data:\n  path: ../data/corpus.txt\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("data.sha256"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.message();
}

TEST_F(PilotConfigTest, NonNumericLrNamesKeyAndValue) {
  Status s = load_error(pilot_with("lr: 3.0e-3", "lr: fast"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(": optimizer.lr: expected a number > 0, got 'fast'"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find(path_), 0u) << s.message();  // starts with the file
}

TEST_F(PilotConfigTest, OutOfRangeValuesNameKeyAndValue) {
  Status s = load_error(pilot_with("dropout: 0.1", "dropout: 1.5"));
  EXPECT_NE(s.message().find("model.dropout: expected a number in [0, 1), got '1.5'"), std::string::npos)
      << s.message();
  s = load_error(pilot_with("micro_batch: 8", "micro_batch: 0"));
  EXPECT_NE(s.message().find("micro_batch: expected an integer >= 1, got '0'"), std::string::npos)
      << s.message();
  s = load_error(pilot_with("seq_len: 64", "seq_len: 6.5"));
  EXPECT_NE(s.message().find("seq_len: expected an integer >= 1, got '6.5'"), std::string::npos)
      << s.message();
  s = load_error(pilot_with("precision: fp32", "precision: fp8"));
  EXPECT_NE(s.message().find("precision: expected one of fp32 bf16, got 'fp8'"), std::string::npos)
      << s.message();
  s = load_error(pilot_with("device: cpu", "device: tpu"));
  EXPECT_NE(s.message().find("device:"), std::string::npos) << s.message();
  s = load_error(pilot_with("strategy: single", "strategy: zero3"));
  EXPECT_NE(s.message().find("strategy:"), std::string::npos) << s.message();
  s = load_error(pilot_with("enabled: true", "enabled: maybe"));
  EXPECT_NE(s.message().find("loss_scaler.enabled: expected true or false, got 'maybe'"), std::string::npos)
      << s.message();
  s = load_error(pilot_with("optimizer:\n", "optimizer: 3\nunused:\n"));
  EXPECT_NE(s.message().find("optimizer: expected a mapping, got '3'"), std::string::npos) << s.message();
}

TEST_F(PilotConfigTest, UnknownKeysAreNamed) {
  Status s = load_error(pilot_with("dropout: 0.1", "dropuot: 0.1"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.dropuot"), std::string::npos) << s.message();
  s = load_error(pilot_with("steps: 16", "steps: 16\nepochs: 3"));
  EXPECT_NE(s.message().find("unknown key(s): epochs"), std::string::npos) << s.message();
}

TEST_F(PilotConfigTest, DModelMustDivideIntoHeads) {
  Status s = load_error(pilot_with("d_model: 64", "d_model: 66"));
  EXPECT_NE(s.message().find("model.d_model: expected a multiple of model.n_heads (4), got '66'"),
            std::string::npos)
      << s.message();
}

TEST_F(PilotConfigTest, TotalStepsMustCoverWarmup) {
  Status s = load_error(pilot_with("total_steps: 64", "total_steps: 3"));
  EXPECT_NE(s.message().find("scheduler.total_steps"), std::string::npos) << s.message();
}

TEST_F(PilotConfigTest, WrongDataHashNamesBothHashesAndTheFile) {
  const std::string wrong(64, 'a');
  Status s = load_error(pilot_with(kCorpusSha, wrong));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("data.sha256: expected " + wrong + ", file "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("corpus.txt has " + kCorpusSha), std::string::npos) << s.message();
  // Without the data check the same config loads.
  EXPECT_TRUE(load_pilot_config(path_, /*check_data=*/false).is_ok());
  s = load_error(pilot_with(kCorpusSha, "xyz"), false);
  EXPECT_NE(s.message().find("data.sha256: expected 64 lowercase hex digits, got 'xyz'"), std::string::npos);
}

TEST_F(PilotConfigTest, MissingDataFileIsAnIoError) {
  Status s = load_error(pilot_with("../data/corpus.txt", "../data/no-such-corpus.txt"));
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.to_string();
  EXPECT_NE(s.message().find("data.path"), std::string::npos) << s.message();
}

TEST_F(PilotConfigTest, EvalBatchesMustFitTheEvalSplit) {
  // 10% of 35149 bytes = 3514 eval tokens = 54 windows of 65 tokens; 7 * 8 = 56 do not fit.
  Status s = load_error(pilot_with("eval_batches: 2", "eval_batches: 7"));
  EXPECT_NE(s.message().find("eval_batches: expected eval_batches * micro_batch = 56"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("got room for 54"), std::string::npos) << s.message();
  EXPECT_TRUE(load_pilot_config(write_config(pilot_with("eval_batches: 2", "eval_batches: 6"))).is_ok());
}

TEST_F(PilotConfigTest, YamlSyntaxErrorGivesLineNumber) {
  Status s = load_error("name: pilot\nmodel:\n  d_model: [64\nseed: 1\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("YAML syntax error"), std::string::npos) << s.message();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s.message(), m, std::regex("\\.yaml:([0-9]+):"))) << s.message();
  int line = std::stoi(m[1]);
  EXPECT_GE(line, 3) << s.message();
  EXPECT_LE(line, 5) << s.message();
}

TEST_F(PilotConfigTest, MissingFileIsAnIoError) {
  Result<PilotConfig> c = load_pilot_config(kConfigDir + "/no-such.yaml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kIoError);
}

TEST_F(PilotConfigTest, ResolvedRoundTripsThroughJson) {
  Result<PilotConfig> c = load_pilot_config(write_config(pilot_with("seed: 42", "seed: 7")));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  nlohmann::json resolved = c->resolved();
  EXPECT_EQ(resolved["seed"], 7);
  EXPECT_EQ(resolved["optimizer"]["lr"], 3e-3);
  EXPECT_EQ(resolved["data"]["sha256"], kCorpusSha);
  EXPECT_EQ(resolved["loss_scaler"]["growth_interval"], 4);

  Result<PilotConfig> back = pilot_config_from_json(resolved, "manifest.json", root_ + "/configs");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->resolved(), resolved);
  EXPECT_EQ(back->data.path, c->data.path);
  EXPECT_EQ(back->optimizer.eps, c->optimizer.eps);  // exact, not merely close

  // The JSON path gets the same validation as the YAML one.
  nlohmann::json bad = resolved;
  bad["optimizer"]["lr"] = "fast";
  Result<PilotConfig> rejected = pilot_config_from_json(bad, "manifest.json");
  ASSERT_FALSE(rejected.is_ok());
  EXPECT_EQ(rejected.status().message(), "manifest.json: optimizer.lr: expected a number > 0, got 'fast'");
  bad = resolved;
  bad["model"]["extra"] = 1;
  EXPECT_FALSE(pilot_config_from_json(bad, "manifest.json").is_ok());
}

}  // namespace
}  // namespace ckpt
