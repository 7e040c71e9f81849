// inspect and verify on a real PyTorch DCP checkpoint (../shared/realworld-samples) and on damaged
// copies of it; verify of unsealed torch.save files (tests/data/pytorch).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "base/byte_source.h"
#include "base/file_io.h"
#include "formats/dcp_checkpoint.h"
#include "formats/zip_archive.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::run_ckptcheck;
using testing::TempDir;

const std::string kSample =
    std::string(CKPTCHECK_SOURCE_DIR) + "/../shared/realworld-samples/dcp-lightning-2rank";
// Written by Debian's torch 1.13 (scripts/make_pytorch_fixtures.py).
const std::string kTorch113 = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/torch113";
const std::string kPytorchData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch";

#define REQUIRE_SAMPLE() \
  if (!is_regular_file(kSample + "/.metadata")) GTEST_SKIP() << "real DCP sample absent: " << kSample

void copy_sample(const TempDir& to) {
  for (const char* f : {".metadata", "__0_0.distcp", "__1_0.distcp"})
    testing::write_file_bytes(to / f, testing::read_file_bytes(kSample + "/" + f));
}

nlohmann::json json_of(const testing::CommandResult& r) {
  return nlohmann::json::parse(r.output.substr(0, r.output.rfind('}') + 1));
}

bool has_code(const nlohmann::json& report, const std::string& code, const std::string& tensor = "") {
  for (const auto& e : report["errors"]) {
    if (e["code"] == code && (tensor.empty() || e["tensor"] == tensor)) return true;
  }
  return false;
}

TEST(DcpCommand, InspectListsGlobalTensorsWithTheirChunks) {
  REQUIRE_SAMPLE();
  const auto r = run_ckptcheck("inspect --json '" + kSample + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["kind"], "dcp");
  EXPECT_EQ(j["metadata"]["layout"], "torch-2.0");
  EXPECT_EQ(j["metadata"]["bytes_items"][0]["fqn"], "optimizer");
  ASSERT_EQ(j["tensors"].size(), 4u);
  EXPECT_EQ(j["tensors"][1]["name"], "model.0.weight");
  EXPECT_EQ(j["tensors"][1]["shape"], nlohmann::json({32, 32}));
  ASSERT_EQ(j["tensors"][1]["chunks"].size(), 2u);
  EXPECT_EQ(j["tensors"][1]["chunks"][0]["label"], "model.0.weight[0:16, 0:32]");
  EXPECT_EQ(j["tensors"][1]["chunks"][1]["label"], "model.0.weight[16:32, 0:32]");
  EXPECT_EQ(j["tensors"][1]["chunks"][1]["sha256"],
            "4462bed28314188d35af343aa8d5c6992b640aefa0bb14ed8dd6e91abc1faf17");
  const auto table = run_ckptcheck("inspect '" + kSample + "'");
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.output.find("(dcp, 4 tensors"), std::string::npos) << table.output;
}

TEST(DcpCommand, VerifyPassesTheRealSample) {
  REQUIRE_SAMPLE();
  const auto r = run_ckptcheck("verify --json '" + kSample + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["tensors"], 4);
  EXPECT_EQ(j["shards"], 2);
}

TEST(DcpCommand, VerifyNamesAFlippedByteAsACrcMismatch) {
  REQUIRE_SAMPLE();
  TempDir tmp;
  copy_sample(tmp);
  auto bytes = testing::read_file_bytes(tmp / "__0_0.distcp");
  bytes[687 + 0x140] ^= 0x01;  // model.2.bias, rank 0: its archive/data/0 starts 0x140 into the item
  testing::write_file_bytes(tmp / "__0_0.distcp", bytes);
  const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = json_of(r);
  EXPECT_TRUE(has_code(j, "zip_crc_mismatch", "model.2.bias")) << r.output;
  const auto inspect = run_ckptcheck("inspect '" + tmp.path() + "'");
  EXPECT_EQ(inspect.exit_code, 1) << inspect.output;
  EXPECT_NE(inspect.output.find("container_corrupt"), std::string::npos) << inspect.output;
}

TEST(DcpCommand, VerifyReportsATruncatedFileAndTrailingGarbage) {
  REQUIRE_SAMPLE();
  TempDir tmp;
  copy_sample(tmp);
  auto bytes = testing::read_file_bytes(tmp / "__1_0.distcp");
  bytes.resize(bytes.size() - 10);
  testing::write_file_bytes(tmp / "__1_0.distcp", bytes);
  auto other = testing::read_file_bytes(tmp / "__0_0.distcp");
  other.push_back(0x42);
  testing::write_file_bytes(tmp / "__0_0.distcp", other);
  const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = json_of(r);
  EXPECT_TRUE(has_code(j, "item_outside_file", "model.0.weight")) << r.output;
  EXPECT_TRUE(has_code(j, "unreferenced_bytes")) << r.output;
  EXPECT_EQ(j["errors"].size(), 2u) << r.output;
}

TEST(DcpCommand, VerifyPassesATorch113Checkpoint) {
  const auto r = run_ckptcheck("verify --json '" + kTorch113 + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["ok"], true) << r.output;
  EXPECT_EQ(j["tensors"], 4) << r.output;
  const auto inspect = run_ckptcheck("inspect --json '" + kTorch113 + "'");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_EQ(json_of(inspect)["metadata"]["layout"], "torch-1.13") << inspect.output;
}

TEST(DcpCommand, VerifyNamesAFlippedByteInATorch113Item) {
  TempDir tmp;
  auto dcp = DcpCheckpoint::open(kTorch113);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  for (const std::string& f : dcp->files())
    testing::write_file_bytes(tmp / f, testing::read_file_bytes(kTorch113 + "/" + f));
  testing::write_file_bytes(tmp / ".metadata", testing::read_file_bytes(kTorch113 + "/.metadata"));
  // model.weight's item: find its storage member (archive/data/0) and flip a byte of the payload.
  const DcpMetadata& md = dcp->metadata();
  auto t = std::find_if(md.tensors.begin(), md.tensors.end(),
                        [](const DcpTensor& x) { return x.fqn == "model.weight"; });
  ASSERT_NE(t, md.tensors.end());
  const DcpItem& item = md.items[t->chunks[0].item];
  auto bytes = testing::read_file_bytes(tmp / item.relative_path);
  std::vector<uint8_t> item_bytes(bytes.begin() + item.offset, bytes.begin() + item.offset + item.length);
  MemoryByteSource source(item_bytes);
  auto zip = ZipArchive::open(source);
  ASSERT_TRUE(zip.is_ok()) << zip.status().to_string();
  const ZipEntry* storage = nullptr;
  for (const auto& e : zip->entries()) {
    if (e.name.find("/data/") != std::string::npos && e.size == 48) storage = &e;  // 3 x 4 float32
  }
  ASSERT_NE(storage, nullptr);
  bytes[item.offset + storage->data_offset + 5] ^= 0x10;
  testing::write_file_bytes(tmp / item.relative_path, bytes);
  const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = json_of(r);
  EXPECT_TRUE(has_code(j, "zip_crc_mismatch", "model.weight")) << r.output;
  EXPECT_NE(r.output.find(item.relative_path), std::string::npos) << r.output;
  // The other tensors are untouched: only model.weight is named.
  for (const auto& e : j["errors"]) EXPECT_EQ(e["tensor"], "model.weight") << r.output;
}

// Found by dcp_fuzz (fuzz/crashes/README.md): inspect --json ended in "internal error" (exit 2) when a
// pickle global's name was not UTF-8.
TEST(DcpCommand, InspectJsonOfAGlobalWithInvalidUtf8) {
  TempDir tmp;
  for (const char* f : {"__0_0.distcp", "__0_1.distcp", "__0_2.distcp", "__0_3.distcp", "__0_4.distcp",
                        "__0_5.distcp", "__0_6.distcp"})
    testing::write_file_bytes(tmp / f, testing::read_file_bytes(kTorch113 + "/" + f));
  auto bytes = testing::read_file_bytes(kTorch113 + "/.metadata");
  const std::string from = "_get_layout";
  auto at = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  ASSERT_NE(at, bytes.end());
  at[4] = 0xa7;
  testing::write_file_bytes(tmp / ".metadata", bytes);
  const auto r = run_ckptcheck("inspect --json '" + tmp.path() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  const auto j = json_of(r);
  bool listed = false;
  for (const auto& g : j["pickle_globals"])
    listed |= g["name"] == "torch.serialization._get\xEF\xBF\xBDlayout";
  EXPECT_TRUE(listed) << r.output;
}

TEST(DcpCommand, VerifyOfUnsealedTorchSaveFiles) {
  // A training checkpoint with optimizer state passes; plain weights need --weights-only.
  auto r = run_ckptcheck("verify --json '" + kPytorchData + "/lightning_like.ckpt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_ckptcheck("verify --json '" + kPytorchData + "/model_state.pt'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_code(json_of(r), "optimizer_state_missing")) << r.output;
  r = run_ckptcheck("verify --weights-only '" + kPytorchData + "/model_state.pt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // A flipped byte in a storage: the CRC-32 check names the member.
  TempDir tmp;
  auto bytes = testing::read_file_bytes(kPytorchData + "/model_state.pt");
  MemoryByteSource source(bytes);
  auto zip = ZipArchive::open(source);
  ASSERT_TRUE(zip.is_ok());
  const ZipEntry* storage = nullptr;
  for (const auto& e : zip->entries()) {
    if (e.name.find("/data/") != std::string::npos && e.size > 0) storage = &e;
  }
  ASSERT_NE(storage, nullptr);
  bytes[storage->data_offset] ^= 0x80;
  testing::write_file_bytes(tmp / "m.pt", bytes);
  r = run_ckptcheck("verify --json --weights-only '" + tmp / "m.pt" + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_code(json_of(r), "zip_crc_mismatch")) << r.output;
  EXPECT_NE(r.output.find(storage->name), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
