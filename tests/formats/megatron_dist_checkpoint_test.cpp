// Megatron-Core torch_dist directories. The fixture tests/data/dcp/megatron_torch_dist/ is built by
// scripts/make_pytorch_fixtures.py *from the published format*, not by Megatron: Debian's torch 1.13
// cannot import Megatron-Core, so `.metadata` is pickled from stand-in classes carrying the real
// module and class names (torch.distributed.checkpoint.metadata.*, Megatron's MCoreMetadata); the
// storage items and common.pt are real torch.save output. Expected hashes come from torch.
#include "formats/megatron_dist_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/file_io.h"
#include "base/sha256.h"
#include "formats/dcp_checkpoint.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {
namespace {

using testing::kDcpTorch113Dir;

using testing::TempDir;

const std::string kMegatron = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/megatron_torch_dist";
nlohmann::json expected_megatron_state() {
  const auto bytes = testing::read_file_bytes(kMegatron + "/../megatron_torch_dist_expected.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

void copy_dir(const std::string& from, const TempDir& to, const std::vector<std::string>& names) {
  for (const auto& n : names) testing::write_file_bytes(to / n, testing::read_file_bytes(from + "/" + n));
}

const std::vector<std::string> kMegatronFiles = {".metadata", "__0_0.distcp", "__1_0.distcp", "common.pt",
                                                 "metadata.json"};

TEST(MegatronDistCheckpoint, ReadsTheTorchDistFixture) {
  const nlohmann::json e = expected_megatron_state();
  auto dcp = DcpCheckpoint::open(kMegatron);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  const DcpMetadata& md = dcp->metadata();
  EXPECT_EQ(md.layout, "torch-2.4");
  EXPECT_EQ(md.version, "1.0.0");
  EXPECT_EQ(md.metadata_class, kMegatronMetadataClass);
  EXPECT_TRUE(md.mcore_data.is_object());
  const MegatronParts& m = dcp->megatron();
  ASSERT_TRUE(m.present);
  EXPECT_TRUE(m.config_problems.empty()) << m.config_problems[0];
  EXPECT_EQ(m.config["sharded_backend"], "torch_dist");
  ASSERT_NE(m.common, nullptr) << m.common_status.to_string();
  EXPECT_EQ(m.common->metadata()["iteration"], 100);

  // .metadata: every tensor with its dtype, global shape and chunks (sorted by global offset).
  ASSERT_EQ(md.tensors.size(), e["tensors"].size());
  for (const auto& et : e["tensors"]) {
    auto t = std::find_if(md.tensors.begin(), md.tensors.end(),
                          [&](const DcpTensor& x) { return x.fqn == et["name"].get<std::string>(); });
    ASSERT_NE(t, md.tensors.end()) << et["name"];
    EXPECT_EQ(dtype_name(t->dtype), et["dtype"].get<std::string>());
    EXPECT_EQ(t->shape, et["shape"].get<std::vector<int64_t>>());
    ASSERT_EQ(t->chunks.size(), et["chunks"].size());
    for (size_t i = 0; i < t->chunks.size(); ++i) {
      EXPECT_EQ(t->chunks[i].offsets, et["chunks"][i]["offsets"].get<std::vector<int64_t>>());
      EXPECT_EQ(t->chunks[i].sizes, et["chunks"][i]["sizes"].get<std::vector<int64_t>>());
    }
  }
  std::vector<std::string> bytes;
  for (const DcpBytesEntry& b : md.bytes) bytes.push_back(b.fqn);
  std::sort(bytes.begin(), bytes.end());
  EXPECT_EQ(bytes, e["bytes"].get<std::vector<std::string>>());

  // Every chunk, every ShardedObject tensor and common.pt's tensors hash as torch saw them.
  auto files = dcp->tensor_files();
  ASSERT_TRUE(files.is_ok()) << files.status().to_string();
  std::map<std::string, std::string> sha_by_label;
  for (const auto& f : *files) {
    EXPECT_TRUE(f->check_container().is_ok()) << f->path();
    for (size_t i = 0; i < f->chunks().size(); ++i) {
      auto sha = hash_chunk(*f, i);
      ASSERT_TRUE(sha.is_ok()) << sha.status().to_string();
      sha_by_label[f->chunks()[i].name + shape_to_string(f->chunks()[i].offsets)] = *sha;
    }
  }
  for (const auto& et : e["tensors"]) {
    for (const auto& c : et["chunks"]) {
      const std::string key =
          et["name"].get<std::string>() + shape_to_string(c["offsets"].get<std::vector<int64_t>>());
      EXPECT_EQ(sha_by_label[key], c["sha256"].get<std::string>()) << key;
    }
  }
  for (const auto& et : e["bytes_tensors"])
    EXPECT_EQ(sha_by_label[et["name"].get<std::string>() + "[0]"], et["sha256"].get<std::string>())
        << et["name"];
  for (const auto& et : e["common_tensors"]) {
    const std::string key = kMegatronCommonTensorPrefix + et["name"].get<std::string>() + "[0]";
    EXPECT_EQ(sha_by_label[key], et["sha256"].get<std::string>()) << key;
  }
  const nlohmann::json summary = dcp->summary();
  EXPECT_EQ(summary["megatron"]["metadata_json"]["sharded_backend_version"], 1);
  EXPECT_EQ(summary["megatron"]["common"]["iteration"], 100);
  EXPECT_TRUE(summary["megatron"]["problems"].empty());
}

TEST(MegatronDistCheckpoint, TensorsSplitAcrossRanksReassembleByGlobalOffset) {
  const nlohmann::json e = expected_megatron_state();
  auto source = TensorSource::open(kMegatron);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  size_t checked = 0;
  for (const auto& et : e["tensors"]) {
    const SourceTensor* t = source->find(et["name"].get<std::string>());
    ASSERT_NE(t, nullptr) << et["name"];
    auto loaded = source->read_tensor(*t);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    EXPECT_EQ(sha256_hex(loaded->bytes.data(), loaded->bytes.size()), et["sha256"].get<std::string>())
        << et["name"];  // linear_proj is split along dim 1: its bytes interleave the two ranks' chunks
    ++checked;
  }
  EXPECT_EQ(checked, 4u);
}

TEST(MegatronDistCheckpoint, ConfigProblemsNameTheKeyExpectedAndFound) {
  const std::string w = "d/metadata.json";
  EXPECT_TRUE(check_megatron_config({{"sharded_backend", "torch_dist"}}, w).empty());
  auto p = check_megatron_config({{"sharded_backend", "zarr"}, {"sharded_backend_version", 1}}, w);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("'sharded_backend' is \"zarr\", expected \"torch_dist\""), std::string::npos) << p[0];
  p = check_megatron_config({{"sharded_backend", "torch_dist"}, {"sharded_backend_version", 2}}, w);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("'sharded_backend_version' is 2, expected 1"), std::string::npos) << p[0];
  p = check_megatron_config({{"sharded_backend", "torch_dist"}, {"colour", "blue"}}, w);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("unknown key 'colour'"), std::string::npos) << p[0];
  p = check_megatron_config({{"common_backend", "torch"}}, w);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("no 'sharded_backend'"), std::string::npos) << p[0];
  p = check_megatron_config(nlohmann::json::array(), w);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find(w + ": expected a JSON object"), std::string::npos) << p[0];
}

TEST(MegatronDistCheckpoint, MissingOrBrokenPartsAreRecordedNotFatal) {
  TempDir tmp;
  copy_dir(kMegatron, tmp, {".metadata", "__0_0.distcp", "__1_0.distcp"});
  const std::string torn = "{\"sharded_backend\": ";
  testing::write_file_bytes(tmp / "metadata.json", std::vector<uint8_t>(torn.begin(), torn.end()));
  auto dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  const MegatronParts& m = dcp->megatron();
  ASSERT_TRUE(m.present);  // MCoreMetadata alone says Megatron
  ASSERT_EQ(m.config_problems.size(), 1u);
  EXPECT_NE(m.config_problems[0].find("metadata.json"), std::string::npos) << m.config_problems[0];
  EXPECT_FALSE(m.has_common);
  EXPECT_EQ(m.common_status.code(), StatusCode::kNotFound);
  EXPECT_NE(m.common_status.message().find(tmp / "common.pt"), std::string::npos);
  auto files = dcp->tensor_files();  // the DCP part still reads
  EXPECT_TRUE(files.is_ok()) << files.status().to_string();

  // A truncated common.pt: open records why; tensor_files (what inspect reads) fails naming it.
  auto common = testing::read_file_bytes(kMegatron + "/common.pt");
  common.resize(common.size() / 2);
  testing::write_file_bytes(tmp / "common.pt", common);
  dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  EXPECT_TRUE(dcp->megatron().has_common);
  EXPECT_EQ(dcp->megatron().common, nullptr);
  files = dcp->tensor_files();
  ASSERT_FALSE(files.is_ok());
  EXPECT_NE(files.status().message().find("common.pt"), std::string::npos) << files.status().to_string();
}

TEST(MegatronDistCheckpoint, APlainDcpDirectoryWithMetadataJsonIsMegatron) {
  // Megatron before MCoreMetadata pickled DCP's own Metadata; metadata.json still marks the layout.
  TempDir tmp;
  copy_dir(kDcpTorch113Dir, tmp,
           {".metadata", "__0_0.distcp", "__0_1.distcp", "__0_2.distcp", "__0_3.distcp", "__0_4.distcp",
            "__0_5.distcp", "__0_6.distcp"});
  auto plain = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(plain.is_ok());
  EXPECT_FALSE(plain->megatron().present);
  EXPECT_FALSE(plain->summary().contains("megatron"));
  testing::write_file_bytes(tmp / "metadata.json", testing::read_file_bytes(kMegatron + "/metadata.json"));
  testing::write_file_bytes(tmp / "common.pt", testing::read_file_bytes(kMegatron + "/common.pt"));
  auto dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(dcp.is_ok());
  EXPECT_TRUE(dcp->megatron().present);
  EXPECT_TRUE(dcp->megatron().config_problems.empty());
  EXPECT_NE(dcp->megatron().common, nullptr);
}

TEST(MegatronDistCheckpoint, ACommonPtSymlinkLeavingTheDirectoryIsRefused) {
  TempDir tmp;
  TempDir outside;
  copy_dir(kMegatron, tmp, {".metadata", "__0_0.distcp", "__1_0.distcp", "metadata.json"});
  testing::write_file_bytes(outside / "common.pt", testing::read_file_bytes(kMegatron + "/common.pt"));
  ASSERT_EQ(::symlink((outside / "common.pt").c_str(), (tmp / "common.pt").c_str()), 0);
  auto dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(dcp.is_ok());
  EXPECT_EQ(dcp->megatron().common, nullptr);
  EXPECT_EQ(dcp->megatron().common_status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dcp->megatron().common_status.message().find("not a regular file inside"), std::string::npos);
}

}  // namespace
}  // namespace ckpt
