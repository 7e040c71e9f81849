// inspect and verify on a real PyTorch DCP checkpoint (../shared/realworld-samples) and on damaged
// copies of it; verify of unsealed torch.save files (tests/data/pytorch).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/byte_source.h"
#include "base/file_io.h"
#include "formats/dcp_checkpoint.h"
#include "formats/zip_archive.h"
#include "tests/support/test_paths.h"
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
// A Megatron-Core torch_dist directory built by scripts/make_pytorch_fixtures.py from the published
// format with stand-in classes under the real names (Debian's torch 1.13 cannot import Megatron).
const std::string kMegatron = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/megatron_torch_dist";

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
  EXPECT_NE(inspect.output.find("[zip_crc_mismatch]"), std::string::npos) << inspect.output;
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

// A DCP checkpoint written one file per item (torch 1.13's FileSystemWriter; 2.x's with
// single_file_per_rank=False) has a file per chunk. 300 of them under `ulimit -n 128`: each data file
// held open made verify and inspect fail with "Too many open files"; beyond kDcpMaxFilesKeptOpen they
// are opened per read. A flipped payload byte in one of them is still found.
TEST(DcpCommand, ACheckpointOfMoreFilesThanTheOpenFileLimitVerifies) {
  TempDir tmp;
  const std::string dir = tmp / "dcp";
  const auto made = testing::run_command("/usr/bin/python3 " + std::string(CKPTCHECK_SOURCE_DIR) +
                                         "/bench/metadata_inputs.py dcp-directory '" + dir + "' 300");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto dcp = DcpCheckpoint::open(dir);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  ASSERT_EQ(dcp->files().size(), 300u);
  const std::string limited =
      "CKPTCHECK_NO_PROGRESS=1 bash -c 'ulimit -n 128 && exec " + std::string(CKPTCHECK_BIN);
  const auto verify = testing::run_command(limited + " verify --weights-only --json " + dir + "'");
  EXPECT_EQ(verify.exit_code, 0) << verify.output.substr(0, 2000);
  EXPECT_EQ(json_of(verify)["tensors"], 300) << verify.output.substr(0, 2000);
  const auto inspect = testing::run_command(limited + " inspect --json " + dir + "'");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output.substr(0, 2000);
  EXPECT_EQ(json_of(inspect)["tensors"].size(), 300u);
  EXPECT_EQ(json_of(inspect)["metadata"]["files"].size(), 300u);
  // On the terminal the 300 files are the first few and a count, not one line of every file.
  const auto text = testing::run_command(limited + " inspect " + dir + "'");
  ASSERT_EQ(text.exit_code, 0) << text.output.substr(0, 2000);
  const size_t at = text.output.find("metadata: ");
  ASSERT_NE(at, std::string::npos) << text.output.substr(0, 2000);
  const std::string line = text.output.substr(at, text.output.find('\n', at) - at);
  EXPECT_LT(line.size(), 2000u) << line.substr(0, 3000);
  EXPECT_NE(line.find("\"... 292 more\""), std::string::npos) << line;
  EXPECT_NE(line.find("(abridged; `inspect --json` has it whole)"), std::string::npos) << line;

  const DcpMetadata& md = dcp->metadata();
  auto t = std::find_if(md.tensors.begin(), md.tensors.end(),
                        [](const DcpTensor& x) { return x.fqn == "model.layer250.weight"; });
  ASSERT_NE(t, md.tensors.end());
  const DcpItem& item = md.items[t->chunks[0].item];
  auto bytes = testing::read_file_bytes(dir + "/" + item.relative_path);
  MemoryByteSource source(
      std::vector<uint8_t>(bytes.begin() + item.offset, bytes.begin() + item.offset + item.length));
  auto zip = ZipArchive::open(source);
  ASSERT_TRUE(zip.is_ok()) << zip.status().to_string();
  const ZipEntry* storage = nullptr;
  for (const auto& e : zip->entries())
    if (e.name.find("/data/") != std::string::npos && e.size == 256) storage = &e;  // 8 x 8 float32
  ASSERT_NE(storage, nullptr);
  bytes[item.offset + storage->data_offset + 5] ^= 0x10;
  testing::write_file_bytes(dir + "/" + item.relative_path, bytes);
  const auto damaged = testing::run_command(limited + " verify --weights-only --json " + dir + "'");
  EXPECT_EQ(damaged.exit_code, 1) << damaged.output.substr(0, 2000);
  EXPECT_TRUE(has_code(json_of(damaged), "zip_crc_mismatch", "model.layer250.weight"))
      << damaged.output.substr(0, 2000);
}

// A DCP directory with a data file gone: the message names the file, and does not tell the user to
// pass one of the directory's own data files instead (the directory was the right thing to pass).
TEST(DcpCommand, AMissingDataFileIsNamedWithoutSuggestingItsSiblings) {
  TempDir tmp;
  auto dcp = DcpCheckpoint::open(kTorch113);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  ASSERT_GT(dcp->files().size(), 1u);
  for (const std::string& f : dcp->files())
    if (f != dcp->files()[1])
      testing::write_file_bytes(tmp / f, testing::read_file_bytes(kTorch113 + "/" + f));
  testing::write_file_bytes(tmp / ".metadata", testing::read_file_bytes(kTorch113 + "/.metadata"));
  for (const char* command : {"inspect", "verify"}) {
    const auto r = run_ckptcheck(std::string(command) + " '" + tmp.path() + "'");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(tmp / dcp->files()[1]), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("missing"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("one level down"), std::string::npos) << r.output;
  }
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
  // A training checkpoint with optimizer state passes once the globals torch.load(weights_only=True)
  // refuses (its hparams Namespace, a loss function, numpy arrays) are reviewed; plain weights need
  // --weights-only.
  auto r = run_ckptcheck("verify --json '" + kPytorchData + "/lightning_like.ckpt'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_code(json_of(r), "pickle_global_refused")) << r.output;
  r = run_ckptcheck(
      "verify --json --allow-global argparse.Namespace --allow-global torch.nn.functional.cross_entropy "
      "--allow-global numpy.core.multiarray.scalar --allow-global numpy.dtype --allow-global "
      "numpy.core.multiarray._reconstruct --allow-global numpy.ndarray '" +
      kPytorchData + "/lightning_like.ckpt'");
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

void copy_megatron(const TempDir& to) {
  for (const char* f : {".metadata", "__0_0.distcp", "__1_0.distcp", "common.pt", "metadata.json"})
    testing::write_file_bytes(to / f, testing::read_file_bytes(kMegatron + "/" + f));
}

void write_text(const std::string& path, const std::string& text) {
  testing::write_file_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(DcpCommand, InspectMegatronTorchDistListsTensorsBytesCommonAndConfig) {
  const auto r = run_ckptcheck("inspect --json '" + kMegatron + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["kind"], "dcp");
  EXPECT_EQ(j["metadata"]["layout"], "torch-2.4");
  const auto& m = j["metadata"]["megatron"];
  EXPECT_EQ(m["metadata_class"], "megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata");
  EXPECT_EQ(m["metadata_json"]["sharded_backend"], "torch_dist");
  EXPECT_EQ(m["common"]["iteration"], 100);
  EXPECT_EQ(m["common"]["opt_param_scheduler"]["decay_style"], "cosine") << m["common"].dump();
  EXPECT_EQ(m["common"]["args"]["tensor_model_parallel_size"], 2) << m["common"].dump();  // a Namespace
  EXPECT_TRUE(m["problems"].empty());
  EXPECT_EQ(j["metadata"]["bytes_items"].size(), 2u);
  EXPECT_TRUE(j["metadata"]["bytes_contents"].contains("rng_state/shard_0.1_1.2")) << r.output;
  std::map<std::string, nlohmann::json> tensors;
  for (const auto& t : j["tensors"]) tensors[t["name"]] = t;
  // Split along dim 1 across ranks: listed in global-offset order.
  const auto& proj = tensors["decoder.layers.0.self_attention.linear_proj.weight"];
  EXPECT_EQ(proj["dtype"], "BF16");
  ASSERT_EQ(proj["chunks"].size(), 2u);
  EXPECT_EQ(proj["chunks"][0]["label"], "decoder.layers.0.self_attention.linear_proj.weight[0:3, 0:2]");
  EXPECT_EQ(proj["chunks"][1]["label"], "decoder.layers.0.self_attention.linear_proj.weight[0:3, 2:4]");
  EXPECT_NE(proj["chunks"][1]["file"].get<std::string>().find("__1_0.distcp"), std::string::npos);
  EXPECT_TRUE(tensors.count("common.pt:optimizer.grad_scaler.scale")) << r.output;
  EXPECT_TRUE(tensors.count("rng_state/shard_0.0_1.2.0.torch_rng_state")) << r.output;
  bool mcore_listed = false;
  for (const auto& g : j["pickle_globals"])
    mcore_listed |= g["name"] == "megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata" &&
                    g["risk"] == "executes";
  EXPECT_TRUE(mcore_listed) << r.output;
}

TEST(DcpCommand, VerifyPassesAMegatronTorchDistDirectory) {
  // common.pt pickles Megatron's argparse.Namespace, which torch.load(weights_only=True) refuses and
  // Megatron's common.pt profile accepts as data (verifier/check/pickle_trust_profile.h): no flag.
  const auto r = run_ckptcheck("verify --json '" + kMegatron + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["ok"], true) << r.output;
  EXPECT_EQ(j["tensors"], 5) << r.output;  // 4 in .metadata, 1 in common.pt
  EXPECT_EQ(j["shards"], 3) << r.output;   // 2 .distcp files and common.pt
}

TEST(DcpCommand, VerifyNamesEachMegatronDefect) {
  {  // metadata.json from another backend
    TempDir tmp;
    copy_megatron(tmp);
    write_text(tmp / "metadata.json", R"({"sharded_backend": "zarr", "sharded_backend_version": 1})");
    const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(has_code(json_of(r), "megatron_config_invalid")) << r.output;
    EXPECT_NE(r.output.find("'sharded_backend' is \\\"zarr\\\", expected \\\"torch_dist\\\""),
              std::string::npos)
        << r.output;
  }
  {  // metadata.json missing: MCoreMetadata alone says this is Megatron
    TempDir tmp;
    copy_megatron(tmp);
    ::unlink((tmp / "metadata.json").c_str());
    const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(has_code(json_of(r), "megatron_config_invalid")) << r.output;
  }
  {  // common.pt missing
    TempDir tmp;
    copy_megatron(tmp);
    ::unlink((tmp / "common.pt").c_str());
    const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const auto j = json_of(r);
    EXPECT_TRUE(has_code(j, "megatron_common_missing")) << r.output;
    EXPECT_EQ(j["errors"].size(), 1u) << r.output;
  }
  {  // a flipped byte in common.pt's tensor: the CRC-32 names common.pt and the member
    TempDir tmp;
    copy_megatron(tmp);
    auto bytes = testing::read_file_bytes(tmp / "common.pt");
    MemoryByteSource source(bytes);
    auto zip = ZipArchive::open(source);
    ASSERT_TRUE(zip.is_ok()) << zip.status().to_string();
    const ZipEntry* storage = nullptr;
    for (const auto& e : zip->entries()) {
      if (e.name.find("/data/") != std::string::npos && e.size == 4) storage = &e;  // grad_scaler.scale
    }
    ASSERT_NE(storage, nullptr);
    bytes[storage->data_offset + 1] ^= 0x04;
    testing::write_file_bytes(tmp / "common.pt", bytes);
    const auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const auto j = json_of(r);
    EXPECT_TRUE(has_code(j, "zip_crc_mismatch")) << r.output;
    EXPECT_NE(r.output.find("common.pt: zip member '" + storage->name), std::string::npos) << r.output;
  }
  {  // a common.pt without the scheduler and iteration: what a resume would lack is named
    TempDir tmp;
    copy_megatron(tmp);
    testing::write_file_bytes(tmp / "common.pt", testing::read_file_bytes(kPytorchData + "/model_state.pt"));
    auto r = run_ckptcheck("verify --json '" + tmp.path() + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const auto j = json_of(r);
    EXPECT_TRUE(has_code(j, "scheduler_state_missing")) << r.output;
    EXPECT_TRUE(has_code(j, "step_state_missing")) << r.output;
    r = run_ckptcheck("verify --weights-only '" + tmp.path() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

// An unsealed torch.save file whose damage lies outside every member's data, where no CRC-32
// reaches: PyTorch's alignment padding in a local header, and a local header's copy of the name.
TEST(DcpCommand, VerifyCatchesAFlippedByteInAZipLocalHeader) {
  const auto original = testing::read_file_bytes(kPytorchData + "/model_state.pt");
  MemoryByteSource source(original);
  auto zip = ZipArchive::open(source);
  ASSERT_TRUE(zip.is_ok());
  const ZipEntry* padded = nullptr;
  for (const auto& e : zip->entries()) {
    if (!padded && e.data_offset - e.local_header - 30 - e.name.size() > 4) padded = &e;  // "FB" + len + 'Z's
  }
  ASSERT_NE(padded, nullptr);
  const uint64_t pad = padded->local_header + 30 + padded->name.size() + 4;
  ASSERT_EQ(original[pad], 'Z');
  TempDir tmp;
  auto bytes = original;
  bytes[pad] ^= 0x01;
  testing::write_file_bytes(tmp / "pad.pt", bytes);
  auto r = run_ckptcheck("verify --json --weights-only '" + tmp / "pad.pt" + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_code(json_of(r), "zip_header_mismatch")) << r.output;
  EXPECT_NE(r.output.find("zip member '" + padded->name + "' local header"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("padding byte 0"), std::string::npos) << r.output;
  const auto inspect = run_ckptcheck("inspect '" + tmp / "pad.pt" + "'");
  EXPECT_EQ(inspect.exit_code, 1) << inspect.output;

  bytes = original;
  bytes[padded->local_header + 30] ^= 0x20;  // the first byte of the local header's name
  testing::write_file_bytes(tmp / "name.pt", bytes);
  r = run_ckptcheck("verify --json --weights-only '" + tmp / "name.pt" + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_code(json_of(r), "zip_header_mismatch")) << r.output;
  r = run_ckptcheck("verify --weights-only '" + kPytorchData + "/model_state.pt'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// DCP's safetensors serialization (torch 2.8.0), built from the published format by
// scripts/make_pytorch_fixtures.py: torch 1.13 cannot write this layout.
const std::string kSafetensorsDcp = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/safetensors_v28";
const std::string kHfSharded = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/hf_sharded_safetensors";

void copy_safetensors_dcp(const TempDir& to) {
  for (const char* f : {".metadata", "__0_0.distcp", "__1_0.distcp"})
    testing::write_file_bytes(to / f, testing::read_file_bytes(kSafetensorsDcp + "/" + f));
}

TEST(DcpSafetensorsCommand, InspectAndVerifyPassBothLayouts) {
  for (const std::string& dir : {kSafetensorsDcp, kHfSharded}) {
    auto r = run_ckptcheck("verify " + dir + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    auto inspect = run_ckptcheck("inspect " + dir);
    EXPECT_EQ(inspect.exit_code, 0) << inspect.output;
    EXPECT_NE(inspect.output.find("model.embed.weight"), std::string::npos) << inspect.output;
    EXPECT_NE(inspect.output.find("\"serialization\":\"safetensors\""), std::string::npos) << inspect.output;
  }
}

TEST(DcpSafetensorsCommand, VerifyNamesATruncatedBlob) {
  for (size_t keep : {size_t{100}, size_t{546}}) {  // inside the header; 10 bytes short of the data
    TempDir dir;
    copy_safetensors_dcp(dir);
    auto bytes = testing::read_file_bytes(dir / "__1_0.distcp");
    bytes.resize(keep);
    testing::write_file_bytes(dir / "__1_0.distcp", bytes);
    auto r = run_ckptcheck("verify " + dir.path() + " --json");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(has_code(json_of(r), "item_outside_file")) << r.output;
    EXPECT_NE(r.output.find("__1_0.distcp"), std::string::npos) << r.output;
  }
}

TEST(DcpSafetensorsCommand, VerifyNamesShardingInfoThatDisagreesWithMetadata) {
  TempDir dir;
  copy_safetensors_dcp(dir);
  auto bytes = testing::read_file_bytes(dir / "__1_0.distcp");
  std::string text(bytes.begin(), bytes.end());
  const std::string from = R"(\"saved_offsets\": [2, 0])";
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos);
  text[at + from.size() - 5] = '3';
  testing::write_file_bytes(dir / "__1_0.distcp", std::vector<uint8_t>(text.begin(), text.end()));
  auto r = run_ckptcheck("verify " + dir.path() + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_code(json_of(r), "item_unreadable", "model.layers.0.weight")) << r.output;
  EXPECT_NE(r.output.find("disagree with .metadata"), std::string::npos) << r.output;
  auto inspect = run_ckptcheck("inspect " + dir.path());
  EXPECT_NE(inspect.exit_code, 0) << inspect.output;
}

TEST(DcpSafetensorsCommand, VerifyRefusesAPathEscapingTheDirectory) {
  // `.metadata` names "../_0.distcp" (same length as "__1_0.distcp", so the pickle stays valid).
  TempDir dir;
  copy_safetensors_dcp(dir);
  auto bytes = testing::read_file_bytes(dir / ".metadata");
  std::string text(bytes.begin(), bytes.end());
  for (size_t at = text.find("__1_0.distcp"); at != std::string::npos; at = text.find("__1_0.distcp", at))
    text.replace(at, 12, "../_0.distcp");
  testing::write_file_bytes(dir / ".metadata", std::vector<uint8_t>(text.begin(), text.end()));
  auto r = run_ckptcheck("verify " + dir.path() + " --json");
  EXPECT_TRUE(has_code(json_of(r), "shard_path_unsafe")) << r.output;
  EXPECT_NE(r.output.find("not a plain name inside"), std::string::npos) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;

  // The sharded layout: a shard that is a symlink leaving the directory.
  TempDir sharded;
  ASSERT_EQ(::mkdir((sharded / "ckpt").c_str(), 0755), 0);
  for (const char* f :
       {"shard-00001-model-00001-of-00001.safetensors", "shard-00002-model-00001-of-00001.safetensors"})
    testing::write_file_bytes(sharded / (std::string("ckpt/") + f),
                              testing::read_file_bytes(kHfSharded + "/" + f));
  ::unlink((sharded / "ckpt/shard-00002-model-00001-of-00001.safetensors").c_str());
  testing::write_file_bytes(
      sharded / "outside.safetensors",
      testing::read_file_bytes(kHfSharded + "/shard-00002-model-00001-of-00001.safetensors"));
  ASSERT_EQ(::symlink("../outside.safetensors",
                      (sharded / "ckpt/shard-00002-model-00001-of-00001.safetensors").c_str()),
            0);
  auto s = run_ckptcheck("verify " + (sharded / "ckpt") + " --json");
  EXPECT_EQ(s.exit_code, 1) << s.output;
  EXPECT_TRUE(has_code(json_of(s), "shard_path_unsafe")) << s.output;
}

}  // namespace
}  // namespace ckpt
