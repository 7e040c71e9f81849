#include "verifier/check/checkpoint_verifier.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "formats/native_shard_format.h"
#include "shards/checkpoint_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"
#include "tests/support/verify_issues_text.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

std::string read_text(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

void write_text(const std::string& path, const std::string& text) {
  write_file_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

VerifyReport verify(const std::string& dir, VerifyOptions options = {}) {
  auto report = verify_checkpoint(dir, options);
  EXPECT_TRUE(report.is_ok()) << report.status().to_string();
  return report.is_ok() ? *report : VerifyReport{};
}

// Expects the checkpoint to fail with `code` among its errors.
void expect_error(const VerifyReport& r, const std::string& code) {
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.has_error(code)) << "expected [" << code << "], got:\n" << issues_text(r.errors);
}

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = save_training_state(root_.path(), full_training_state()); }
  std::string shard(size_t i) const { return fixture_shard_path(dir_, i); }
  TempDir root_;
  std::string dir_;
};

TEST_F(VerifierTest, CleanCheckpointPassesWithNoWarnings) {
  const VerifyReport r = verify(dir_);
  EXPECT_TRUE(r.ok()) << issues_text(r.errors);
  EXPECT_TRUE(r.warnings.empty()) << issues_text(r.warnings);
  EXPECT_EQ(r.step, kFixtureStep);
  EXPECT_EQ(r.shards, 3u);
  EXPECT_EQ(r.tensors, full_training_state().size());
  uint64_t total = 0;
  for (const auto& s : read_fixture_manifest(dir_).shards) total += s.bytes;
  EXPECT_EQ(r.bytes_hashed, total);
}

TEST_F(VerifierTest, QuickModeHashesNothingAndStillChecksHeaders) {
  VerifyOptions quick;
  quick.quick = true;
  const VerifyReport r = verify(dir_, quick);
  EXPECT_TRUE(r.ok()) << issues_text(r.errors);
  EXPECT_EQ(r.bytes_hashed, 0u);
  edit_manifest(dir_, [](Manifest& m) { m.tensors[0].chunks[0].data_offset += 64; });
  expect_error(verify(dir_, quick), verify_code::kChunkHeaderMismatch);
}

TEST_F(VerifierTest, ReportsAreTheSameWhateverTheJobCount) {
  const ManifestChunk c = fixture_chunk(dir_, "model.blocks.0.w", 1);
  auto bytes = read_file_bytes(shard(c.shard));
  bytes[c.data_offset] ^= 0x10;
  write_file_bytes(shard(c.shard), bytes);
  VerifyOptions one, many;
  one.jobs = 1;
  many.jobs = 8;
  EXPECT_EQ(issues_text(verify(dir_, one).errors), issues_text(verify(dir_, many).errors));
}

TEST_F(VerifierTest, ManifestMissing) {
  ASSERT_EQ(::unlink((dir_ + "/manifest.json").c_str()), 0);
  expect_error(verify(dir_), verify_code::kManifestMissing);
}

TEST_F(VerifierTest, ManifestInvalidSyntax) {
  write_file_bytes(dir_ + "/manifest.json", {'{', '"', 'x'});
  expect_error(verify(dir_), verify_code::kManifestInvalid);
}

TEST_F(VerifierTest, ManifestInvalidUnknownVersion) {
  auto text = read_file_bytes(dir_ + "/manifest.json");
  std::string s(text.begin(), text.end());
  const auto at = s.find("\"version\": 1");
  ASSERT_NE(at, std::string::npos);
  s.replace(at, 12, "\"version\": 2");
  write_file_bytes(dir_ + "/manifest.json", std::vector<uint8_t>(s.begin(), s.end()));
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kManifestInvalid);
  EXPECT_NE(r.errors[0].message.find("version 2"), std::string::npos) << r.errors[0].message;
}

TEST_F(VerifierTest, ManifestInvalidDuplicateTensorName) {
  edit_manifest(dir_, [](Manifest& m) { m.tensors.push_back(m.tensors[0]); });
  expect_error(verify(dir_), verify_code::kManifestInvalid);
}

TEST_F(VerifierTest, ShardMissing) {
  ASSERT_EQ(::unlink(shard(1).c_str()), 0);
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kShardMissing);
  EXPECT_EQ(r.errors[0].shard, read_fixture_manifest(dir_).shards[1].path);
}

TEST_F(VerifierTest, ShardPathWithDotDotIsUnsafe) {
  auto text = read_file_bytes(dir_ + "/manifest.json");
  std::string s(text.begin(), text.end());
  const std::string name = read_fixture_manifest(dir_).shards[0].path;
  s.replace(s.find("\"" + name + "\""), name.size() + 2, "\"../" + name + "\"");
  write_file_bytes(dir_ + "/manifest.json", std::vector<uint8_t>(s.begin(), s.end()));
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kShardPathUnsafe);
  EXPECT_FALSE(r.has_error(verify_code::kManifestInvalid));
}

TEST_F(VerifierTest, ShardSymlinkLeavingTheDirectoryIsUnsafe) {
  const std::string outside = root_ / "outside.cks";
  ASSERT_EQ(::rename(shard(0).c_str(), outside.c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), shard(0).c_str()), 0);
  expect_error(verify(dir_), verify_code::kShardPathUnsafe);
}

TEST_F(VerifierTest, ShardThatIsADirectoryIsNotRegular) {
  ASSERT_EQ(::unlink(shard(2).c_str()), 0);
  ASSERT_EQ(::mkdir(shard(2).c_str(), 0755), 0);
  expect_error(verify(dir_), verify_code::kShardNotRegular);
}

TEST_F(VerifierTest, ShardSizeMismatch) {
  edit_manifest(dir_, [](Manifest& m) { m.shards[1].bytes += 1; });
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kShardSizeMismatch);
  EXPECT_EQ(r.errors.size(), 1u) << issues_text(r.errors);
}

TEST_F(VerifierTest, ShardSha256Mismatch) {
  edit_manifest(dir_, [](Manifest& m) { m.shards[0].sha256 = std::string(64, 'a'); });
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kShardSha256Mismatch);
  EXPECT_NE(r.errors[0].message.find("expected aaaa"), std::string::npos) << r.errors[0].message;
}

TEST_F(VerifierTest, ShardUnreadableWhenTheHeaderIsDamaged) {
  auto bytes = read_file_bytes(shard(0));
  bytes[60] ^= 0x01;  // inside the header JSON: its SHA-256 no longer matches
  write_file_bytes(shard(0), bytes);
  refresh_shard_hashes(dir_);
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kShardUnreadable);
  EXPECT_NE(r.errors[0].message.find("header sha256 mismatch"), std::string::npos) << r.errors[0].message;
}

TEST_F(VerifierTest, ShardTruncated) {
  auto bytes = read_file_bytes(shard(1));
  bytes.resize(bytes.size() - 100);
  write_file_bytes(shard(1), bytes);
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kShardTruncated);
  EXPECT_TRUE(r.has_error(verify_code::kShardSizeMismatch));
}

TEST_F(VerifierTest, ChunkSha256MismatchNamesShardTensorAndOffset) {
  const ManifestChunk c = fixture_chunk(dir_, "model.blocks.0.w", 2);
  auto bytes = read_file_bytes(shard(c.shard));
  bytes[c.data_offset + 7] ^= 0x04;
  write_file_bytes(shard(c.shard), bytes);
  refresh_shard_hashes(dir_);
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kChunkSha256Mismatch);
  ASSERT_EQ(r.errors.size(), 1u) << issues_text(r.errors);
  EXPECT_EQ(r.errors[0].tensor, "model.blocks.0.w");
  EXPECT_EQ(r.errors[0].shard, read_fixture_manifest(dir_).shards[c.shard].path);
  EXPECT_NE(r.errors[0].message.find("@" + std::to_string(c.data_offset)), std::string::npos)
      << r.errors[0].message;
}

TEST_F(VerifierTest, ChunkMissingInShardAndTheStrayChunkIsAWarning) {
  edit_manifest(dir_, [](Manifest& m) {
    auto& c = m.tensors[0].chunks[0];
    c.shard = (c.shard + 1) % m.shards.size();
  });
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kChunkMissingInShard);
  EXPECT_TRUE(r.has_warning(verify_code::kChunkNotInManifest)) << issues_text(r.warnings);
}

TEST_F(VerifierTest, ChunkHeaderMismatchOnDtype) {
  edit_manifest(dir_, [](Manifest& m) { m.tensors[1].dtype = DType::kU8; });  // tensors[1] is model.mask
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kChunkHeaderMismatch);
  EXPECT_NE(r.errors[0].message.find("dtype manifest U8 vs header BOOL"), std::string::npos)
      << r.errors[0].message;
}

TEST_F(VerifierTest, CoverageGapWhenTheManifestDropsAChunk) {
  edit_manifest(dir_, [](Manifest& m) { m.tensors[0].chunks.erase(m.tensors[0].chunks.begin() + 1); });
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kCoverageGap);
  EXPECT_TRUE(r.has_warning(verify_code::kChunkNotInManifest));
}

TEST_F(VerifierTest, CoverageOverlapWhenAChunkIsListedTwice) {
  edit_manifest(dir_, [](Manifest& m) { m.tensors[0].chunks.push_back(m.tensors[0].chunks[0]); });
  expect_error(verify(dir_), verify_code::kCoverageOverlap);
}

TEST_F(VerifierTest, ChunkOutOfBounds) {
  edit_manifest(dir_, [](Manifest& m) { m.tensors[0].chunks[0].offsets[0] = 100; });
  expect_error(verify(dir_), verify_code::kChunkOutOfBounds);
}

TEST_F(VerifierTest, UnlistedFileIsAWarningNotAnError) {
  write_file_bytes(dir_ + "/notes.txt", {'h', 'i'});
  const VerifyReport r = verify(dir_);
  EXPECT_TRUE(r.ok()) << issues_text(r.errors);
  EXPECT_TRUE(r.has_warning(verify_code::kUnlistedFile));
}

TEST_F(VerifierTest, UncommittedLeftoversAreListedButDoNotFail) {
  ASSERT_EQ(::mkdir((root_ / ".tmp-step_00000030-999").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root_ / "step_00000040").c_str(), 0755), 0);
  const VerifyReport r = verify(dir_);
  EXPECT_TRUE(r.ok()) << issues_text(r.errors);
  EXPECT_TRUE(r.has_warning(verify_code::kUncommittedCheckpoint));
  EXPECT_EQ(r.uncommitted.size(), 2u);
}

// ---- values and resumability: checkpoints written with the defect in the state ---------------

VerifyReport verify_state(const std::vector<LoadedTensor>& state, int64_t step = kFixtureStep) {
  TempDir root;
  return verify(save_training_state(root.path(), state, step));
}

TEST(VerifierValues, NonfiniteValuesAreCountedPerTensor) {
  auto state = full_training_state();
  LoadedTensor* w = find_state_tensor(state, "model.blocks.0.w");
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::memcpy(w->bytes.data() + 4 * 3, &nan, 4);
  std::memcpy(w->bytes.data() + 4 * 300, &nan, 4);  // in another chunk
  std::memcpy(w->bytes.data() + 4 * 511, &inf, 4);
  const VerifyReport r = verify_state(state);
  expect_error(r, verify_code::kNonfiniteValues);
  ASSERT_EQ(r.errors.size(), 1u) << issues_text(r.errors);
  EXPECT_EQ(r.errors[0].tensor, "model.blocks.0.w");
  EXPECT_NE(r.errors[0].message.find("2 NaN and 1 Inf of 512"), std::string::npos) << r.errors[0].message;
}

TEST(VerifierResume, OptimizerMomentMissing) {
  auto state = full_training_state();
  drop_state_tensor(state, "optimizer.model.blocks.0.w.exp_avg_sq");
  const VerifyReport r = verify_state(state);
  expect_error(r, verify_code::kOptimizerStateMissing);
  EXPECT_EQ(r.errors[0].tensor, "model.blocks.0.w");
}

TEST(VerifierResume, NoOptimizerComponentNamesTheFirstParam) {
  auto state = full_training_state();
  for (const char* n : {"optimizer.model.blocks.0.w.exp_avg", "optimizer.model.blocks.0.w.exp_avg_sq",
                        "optimizer.model.blocks.0.w.step"}) {
    drop_state_tensor(state, n);
  }
  const VerifyReport r = verify_state(state);
  expect_error(r, verify_code::kOptimizerStateMissing);
  EXPECT_EQ(r.errors.size(), 1u) << issues_text(r.errors);
  EXPECT_NE(r.errors[0].message.find("model.blocks.0.w"), std::string::npos);
}

TEST(VerifierResume, OptimizerShapeMismatch) {
  auto state = full_training_state();
  find_state_tensor(state, "optimizer.model.blocks.0.w.exp_avg")->shape = {16, 32};
  expect_error(verify_state(state), verify_code::kOptimizerShapeMismatch);
}

TEST(VerifierResume, MaskIsABufferAndNeedsNoOptimizerState) {
  // The clean fixture has model.mask (BOOL) without optimizer entries and passes.
  EXPECT_TRUE(verify_state(full_training_state()).ok());
}

struct MissingStateCase {
  const char* tensor;
  const char* code;
};

class VerifierMissingState : public ::testing::TestWithParam<MissingStateCase> {};

TEST_P(VerifierMissingState, IsReported) {
  auto state = full_training_state();
  drop_state_tensor(state, GetParam().tensor);
  const VerifyReport r = verify_state(state);
  expect_error(r, GetParam().code);
}

INSTANTIATE_TEST_SUITE_P(
    EachStatePiece, VerifierMissingState,
    ::testing::Values(MissingStateCase{"scheduler.last_step", verify_code::kSchedulerStateMissing},
                      MissingStateCase{"scheduler.last_lr", verify_code::kSchedulerStateMissing},
                      MissingStateCase{"progress.skipped_steps", verify_code::kStepStateMissing},
                      MissingStateCase{"progress.global_step", verify_code::kStepStateMissing},
                      MissingStateCase{"scaler.growth_tracker", verify_code::kScalerStateMissing},
                      MissingStateCase{"scaler.scale", verify_code::kScalerStateMissing},
                      MissingStateCase{"rng.cpu_state", verify_code::kRngStateMissing},
                      MissingStateCase{"data.cursor", verify_code::kDataStateMissing},
                      MissingStateCase{"optimizer.model.blocks.0.w.step",
                                       verify_code::kOptimizerStateMissing}),
    // Named after the dropped tensor: gtest's default name for a struct prints its bytes, two
    // pointers here, so the ctest names changed from one build to the next.
    [](const ::testing::TestParamInfo<MissingStateCase>& info) {
      return testing::gtest_param_name(info.param.tensor);
    });

TEST(VerifierResume, OptimizerStepPlusSkippedMustEqualGlobalStep) {
  auto state = full_training_state();
  *find_state_tensor(state, "optimizer.model.blocks.0.w.step") =
      i64_scalar("optimizer.model.blocks.0.w.step", 19);
  const VerifyReport r = verify_state(state);
  expect_error(r, verify_code::kStepDisagreement);
  EXPECT_EQ(r.errors[0].tensor, "optimizer.model.blocks.0.w.step");
}

TEST(VerifierResume, SchedulerMustAgreeWithGlobalStep) {
  auto state = full_training_state();
  *find_state_tensor(state, "scheduler.last_step") = i64_scalar("scheduler.last_step", 0);  // reset scheduler
  const VerifyReport r = verify_state(state);
  expect_error(r, verify_code::kStepDisagreement);
  EXPECT_EQ(r.errors[0].tensor, "scheduler.last_step");
}

TEST(VerifierResume, ManifestStepMustAgreeWithGlobalStep) {
  const VerifyReport r = verify_state(full_training_state(), kFixtureStep + 1);
  expect_error(r, verify_code::kStepDisagreement);
  EXPECT_EQ(r.errors[0].tensor, "progress.global_step");
}

TEST(VerifierResume, LossScaleMustBePositive) {
  for (double bad : {0.0, -1.0}) {
    auto state = full_training_state();
    *find_state_tensor(state, "scaler.scale") = f64_scalar("scaler.scale", bad);
    const VerifyReport r = verify_state(state);
    expect_error(r, verify_code::kLossScaleInvalid);
    EXPECT_EQ(r.errors.size(), 1u) << issues_text(r.errors);
  }
}

TEST(VerifierResume, InfiniteLossScaleIsBothNonfiniteAndInvalid) {
  auto state = full_training_state();
  *find_state_tensor(state, "scaler.scale") =
      f64_scalar("scaler.scale", std::numeric_limits<double>::infinity());
  const VerifyReport r = verify_state(state);
  expect_error(r, verify_code::kLossScaleInvalid);
  expect_error(r, verify_code::kNonfiniteValues);
}

// ---- paths ------------------------------------------------------------------------------------

TEST(VerifyPath, RootVerifiesTheLatestCheckpoint) {
  TempDir root;
  save_training_state(root.path(), full_training_state(10, 0), 10);
  const std::string latest = save_training_state(root.path(), full_training_state());
  auto r = verify_path(root.path() + "/", {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->path, latest);
  EXPECT_TRUE(r->ok()) << issues_text(r->errors);
}

TEST(VerifyPath, StepDirWithoutManifestIsManifestMissing) {
  TempDir root;
  ASSERT_EQ(::mkdir((root / "step_00000003").c_str(), 0755), 0);
  auto r = verify_path(root / "step_00000003", {});
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->has_error(verify_code::kManifestMissing));
}

TEST(VerifyPath, NonexistentOrEmptyPathIsAnErrorNotAReport) {
  TempDir root;
  EXPECT_FALSE(verify_path(root / "nope", {}).is_ok());
  EXPECT_EQ(verify_path(root.path(), {}).status().code(), StatusCode::kNotFound);
}

TEST(VerifyRoot, AllVerifiesEveryCommittedCheckpointAndListsLeftovers) {
  TempDir root;
  save_training_state(root.path(), full_training_state(10, 0), 10);
  const std::string bad = save_training_state(root.path(), full_training_state());
  ASSERT_EQ(::mkdir((root / ".tmp-step_00000030-1").c_str(), 0755), 0);
  edit_manifest(bad, [](Manifest& m) { m.shards[0].bytes += 1; });
  auto r = verify_root(root.path(), {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->checkpoints.size(), 2u);
  EXPECT_TRUE(r->checkpoints[0].ok());
  EXPECT_FALSE(r->checkpoints[1].ok());
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->uncommitted.size(), 1u);
  const nlohmann::json j = report_to_json(*r);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["checkpoints"].size(), 2u);
}

TEST(VerifyReportFormat, JsonHasTheDocumentedShapeAndTextStartsWithTheVerdict) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state());
  edit_manifest(dir, [](Manifest& m) { m.shards[0].bytes += 1; });
  const VerifyReport r = verify(dir);
  const nlohmann::json j = report_to_json(r);
  for (const char* key : {"ok", "path", "step", "errors", "warnings", "uncommitted", "shards", "tensors",
                          "bytes_hashed", "seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["errors"][0]["code"], "shard_size_mismatch");
  for (const char* key : {"code", "shard", "tensor", "message"})
    EXPECT_TRUE(j["errors"][0].contains(key)) << key;
  const std::string text = report_to_text(r);
  EXPECT_EQ(text.rfind("FAIL " + dir, 0), 0u) << text;
  EXPECT_NE(text.find("\n[shard_size_mismatch] " + r.errors[0].shard + ": "), std::string::npos) << text;
}

// A field no shard check reads, edited in the committed text (not re-sealed): the manifest's own
// digest catches it, and nothing resumes from it.
TEST_F(VerifierTest, EditedConfigFieldFailsTheManifestDigest) {
  const std::string path = dir_ + "/manifest.json";
  std::string text = read_text(path);
  const std::string step_field = "\"strategy\": \"single\"";
  const size_t at = text.find(step_field);
  ASSERT_NE(at, std::string::npos) << text.substr(0, 400);
  text.replace(at, step_field.size(), "\"strategy\": \"fsdp\"");
  write_text(path, text);
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kManifestDigestMismatch);
  EXPECT_EQ(r.errors.size(), 1u) << issues_text(r.errors);
  auto loaded = read_manifest_file(dir_);
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(loaded.status().message().find("manifest_sha256 mismatch"), std::string::npos)
      << loaded.status().message();
}

TEST_F(VerifierTest, ManifestWithoutDigestWarnsInsteadOfPassingSilently) {
  const std::string path = dir_ + "/manifest.json";
  auto j = nlohmann::json::parse(read_text(path));
  ASSERT_TRUE(j.contains("manifest_sha256"));
  j.erase("manifest_sha256");
  write_text(path, j.dump(1) + "\n");
  const VerifyReport r = verify(dir_);
  EXPECT_TRUE(r.ok()) << issues_text(r.errors);
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w.code == verify_code::kManifestDigestMissing;
  EXPECT_TRUE(warned) << issues_text(r.warnings);
}

TEST_F(VerifierTest, DeeplyNestedConfigIsRefusedNotACrash) {
  const std::string path = dir_ + "/manifest.json";
  std::string text = read_text(path);
  const std::string key = "\"config\": ";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const size_t value_end = text.find("\n \"", at);  // the next top-level key
  ASSERT_NE(value_end, std::string::npos);
  text.replace(at + key.size(), value_end - (at + key.size()), "{\"x\": " + deep + "},");
  write_text(path, text);
  const VerifyReport r = verify(dir_);
  expect_error(r, verify_code::kManifestInvalid);
  EXPECT_NE(issues_text(r.errors).find("nests deeper than"), std::string::npos) << issues_text(r.errors);
}

// safetensors shards record their header's digest (length field + JSON, which holds every payload's
// SHA-256): damage to the header padding and to a payload are both caught, and a shard recorded
// with a whole-file digest by an older writer still verifies.
TEST(VerifierSafetensors, ShardsAreCoveredByTheirHeaderDigest) {
  TempDir root;
  std::vector<TensorView> views;
  const auto state = full_training_state();
  for (const auto& t : state) views.push_back(t.view());
  CheckpointMetadata meta;
  meta.step = kFixtureStep;
  CheckpointWriteOptions options;
  options.num_shards = 2;
  options.split_min_bytes = 1024;
  options.format = "safetensors";
  auto committed = write_checkpoint(root.path(), views, meta, options);
  ASSERT_TRUE(committed.is_ok()) << committed.status().to_string();
  const std::string dir = committed->dir;
  EXPECT_EQ(committed->manifest.shards[0].sha256_of, "header");
  const VerifyReport clean = verify(dir);
  EXPECT_TRUE(clean.ok()) << issues_text(clean.errors);

  const std::string shard = fixture_shard_path(dir, 0);
  const auto original = read_file_bytes(shard);
  uint64_t header_len = 0;
  std::memcpy(&header_len, original.data(), 8);  // little-endian host
  ASSERT_EQ(original[8 + header_len - 1], ' ');  // padded up to the page-aligned data section
  auto bytes = original;
  bytes[8 + header_len - 1] = '\t';  // still valid JSON whitespace: only the digest can tell
  write_file_bytes(shard, bytes);
  expect_error(verify(dir), verify_code::kShardSha256Mismatch);

  write_file_bytes(shard, original);
  const ManifestChunk c = read_fixture_manifest(dir).tensors[0].chunks[0];
  const std::string chunk_shard = fixture_shard_path(dir, c.shard);
  auto payload = read_file_bytes(chunk_shard);
  const auto payload_original = payload;
  payload[c.data_offset] ^= 0x01;
  write_file_bytes(chunk_shard, payload);
  expect_error(verify(dir), verify_code::kChunkSha256Mismatch);
  write_file_bytes(chunk_shard, payload_original);

  edit_manifest(dir, [&](Manifest& m) {
    for (auto& s : m.shards) {
      s.sha256_of = "file";
      s.sha256 = *sha256_hex_of_file(dir + "/" + s.path);
    }
  });
  const VerifyReport old = verify(dir);
  EXPECT_TRUE(old.ok()) << issues_text(old.errors);
}

// A version-2 manifest's headers are read and checked against their digests once, when the chunks
// are taken from them: verify's scan then starts after each header, and must still catch a non-zero
// byte in the padding between payloads, a flipped payload byte, and an edited header.
TEST(VerifierVersionTwo, ScansAfterTheHeadersAndStillCatchesEveryByte) {
  TempDir root;
  const std::string dir = save_training_state(root.path(), full_training_state(), kFixtureStep, 3, "native",
                                              ChunkRecords::kInShardHeaders);
  const VerifyReport clean = verify(dir);
  EXPECT_TRUE(clean.ok()) << issues_text(clean.errors);
  const Manifest m = read_fixture_manifest(dir);
  ASSERT_EQ(m.chunk_records, ChunkRecords::kInShardHeaders);
  // A payload whose end is not on the 64-byte alignment: zero padding follows it.
  const ManifestChunk* padded = nullptr;
  for (const auto& t : m.tensors)
    for (const auto& c : t.chunks)
      if (!padded && c.data_bytes % 64 != 0) padded = &c;
  ASSERT_NE(padded, nullptr);
  const std::string shard = dir + "/" + m.shards[padded->shard].path;
  const auto original = read_file_bytes(shard);
  auto bytes = original;
  bytes[padded->data_offset + padded->data_bytes] = 0x01;
  write_file_bytes(shard, bytes);
  const VerifyReport stray = verify(dir);
  expect_error(stray, verify_code::kShardSha256Mismatch);
  EXPECT_NE(issues_text(stray.errors).find("non-zero byte outside the header and every payload"),
            std::string::npos)
      << issues_text(stray.errors);

  bytes = original;
  bytes[padded->data_offset] ^= 0x01;
  write_file_bytes(shard, bytes);
  expect_error(verify(dir), verify_code::kChunkSha256Mismatch);

  bytes = original;
  bytes[kNativePreambleBytes + 2] ^= 0x01;  // inside the header's JSON
  write_file_bytes(shard, bytes);
  expect_error(verify(dir), verify_code::kShardUnreadable);
  write_file_bytes(shard, original);
  EXPECT_TRUE(verify(dir).ok());
}

}  // namespace
}  // namespace ckpt
