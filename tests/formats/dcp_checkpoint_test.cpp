#include "formats/dcp_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/file_io.h"
#include "base/sha256.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::kDcpTorch113Dir;

using testing::TempDir;

const std::string kSample = "/work/shared/realworld-samples/dcp-lightning-2rank";
const std::string kSampleRel =
    std::string(CKPTCHECK_SOURCE_DIR) + "/../shared/realworld-samples/dcp-lightning-2rank";

std::string sample_dir() {
  if (is_dcp_directory(kSampleRel)) return kSampleRel;
  if (is_dcp_directory(kSample)) return kSample;
  return "";
}

#define REQUIRE_SAMPLE(dir)             \
  const std::string dir = sample_dir(); \
  if (dir.empty()) GTEST_SKIP() << "real DCP sample absent: " << kSampleRel

// Copies the sample into a writable dir so a test can damage it.
void copy_sample(const std::string& from, const TempDir& to) {
  for (const char* f : {".metadata", "__0_0.distcp", "__1_0.distcp"})
    testing::write_file_bytes(to / f, testing::read_file_bytes(from + "/" + f));
}

// An item's slice streams its own bytes with offsets relative to the item, and stops at its end.
TEST(SliceByteSource, ScansItsRangeOfTheParentWithItemOffsets) {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13);
  auto parent = std::make_shared<MemoryByteSource>(bytes);
  SliceByteSource slice(parent, 100, 500, "item x");
  std::vector<uint8_t> seen;
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(slice
                  .scan(50, 300, 128,
                        [&](uint64_t at, const uint8_t* data, size_t n) {
                          offsets.push_back(at);
                          seen.insert(seen.end(), data, data + n);
                        })
                  .is_ok());
  EXPECT_EQ(seen, std::vector<uint8_t>(bytes.begin() + 150, bytes.begin() + 450));
  EXPECT_EQ(offsets, (std::vector<uint64_t>{50, 178, 306}));
  const Status past = slice.scan(400, 101, 128, [](uint64_t, const uint8_t*, size_t) {});
  EXPECT_EQ(past.code(), StatusCode::kTruncated);
  EXPECT_NE(past.message().find("item x"), std::string::npos) << past.message();
}

TEST(DcpCheckpoint, ReadsTheRealTorch20Sample) {
  REQUIRE_SAMPLE(dir);
  auto dcp = DcpCheckpoint::open(dir);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  const DcpMetadata& md = dcp->metadata();
  EXPECT_EQ(md.layout, "torch-2.0");
  EXPECT_EQ(md.items.size(), 9u);
  ASSERT_EQ(md.tensors.size(), 4u);
  EXPECT_EQ(md.tensors[1].fqn, "model.0.weight");
  EXPECT_EQ(md.tensors[1].shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(md.tensors[1].torch_dtype, "torch.float32");
  ASSERT_EQ(md.tensors[1].chunks.size(), 2u);
  EXPECT_EQ(md.tensors[1].chunks[1].offsets, (std::vector<int64_t>{16, 0}));
  const DcpItem& it = md.items[md.tensors[1].chunks[1].item];
  EXPECT_EQ(it.relative_path, "__1_0.distcp");
  EXPECT_EQ(it.offset, 2433u);
  EXPECT_EQ(it.length, 2795u);
  ASSERT_EQ(md.bytes.size(), 1u);
  EXPECT_EQ(md.bytes[0].fqn, "optimizer");
  EXPECT_TRUE(md.items[md.bytes[0].item].is_bytes);
  EXPECT_EQ(dcp->files(), (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp"}));
  for (size_t i = 0; i < md.items.size(); ++i) EXPECT_EQ(dcp->item_bounds_problem(i), "") << i;

  auto files = dcp->tensor_files();
  ASSERT_TRUE(files.is_ok()) << files.status().to_string();
  ASSERT_EQ(files->size(), 3u);  // .metadata, then the two data files
  const TensorFile& rank1 = *(*files)[2];
  bool found = false;
  for (size_t i = 0; i < rank1.chunks().size(); ++i) {
    const ChunkInfo& c = rank1.chunks()[i];
    if (c.name != "model.0.weight") continue;
    found = true;
    EXPECT_EQ(c.label(), "model.0.weight[16:32, 0:32]");
    EXPECT_EQ(c.data_bytes, 2048u);
    // The raw bytes of archive/data/0 in that item, as Python's zipfile reads them.
    auto sha = hash_chunk(rank1, i);
    ASSERT_TRUE(sha.is_ok());
    EXPECT_EQ(*sha, "4462bed28314188d35af343aa8d5c6992b640aefa0bb14ed8dd6e91abc1faf17");
    // data_offset is absolute in the .distcp file: the same bytes read straight from it.
    std::vector<uint8_t> bytes = testing::read_file_bytes(dir + "/__1_0.distcp");
    ASSERT_LE(c.data_offset + c.data_bytes, bytes.size());
    EXPECT_EQ(sha256_hex(bytes.data() + c.data_offset, c.data_bytes), *sha);
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(rank1.check_container().is_ok());
  EXPECT_FALSE((*files)[0]->pickle_globals().empty());  // .metadata's classes are listed
}

TEST(DcpCheckpoint, FlippedByteIsACrcErrorNamingTheItem) {
  REQUIRE_SAMPLE(dir);
  TempDir tmp;
  copy_sample(dir, tmp);
  auto bytes = testing::read_file_bytes(tmp / "__0_0.distcp");
  bytes[3120 + 2795 - 600] ^= 0xff;  // inside model.0.weight's archive/data/0
  testing::write_file_bytes(tmp / "__0_0.distcp", bytes);
  auto dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(dcp.is_ok());
  auto files = dcp->tensor_files();
  ASSERT_TRUE(files.is_ok()) << files.status().to_string();
  const Status st = (*files)[1]->check_container();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("model.0.weight"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("CRC-32 mismatch"), std::string::npos) << st.message();
}

TEST(DcpCheckpoint, TruncatedFileLeavesAnItemOutside) {
  REQUIRE_SAMPLE(dir);
  TempDir tmp;
  copy_sample(dir, tmp);
  auto bytes = testing::read_file_bytes(tmp / "__1_0.distcp");
  bytes.resize(3000);
  testing::write_file_bytes(tmp / "__1_0.distcp", bytes);
  auto dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_TRUE(dcp.is_ok());
  size_t outside = 0;
  for (size_t i = 0; i < dcp->metadata().items.size(); ++i) {
    const std::string p = dcp->item_bounds_problem(i);
    if (p.empty()) continue;
    ++outside;
    EXPECT_NE(p.find("model.0.weight at [16, 0]"), std::string::npos) << p;
    EXPECT_NE(p.find("3000 bytes"), std::string::npos) << p;
    EXPECT_EQ(dcp->open_item(i).status().code(), StatusCode::kTruncated);
  }
  EXPECT_EQ(outside, 1u);
  EXPECT_FALSE(dcp->tensor_files().is_ok());
}

TEST(DcpCheckpoint, MissingDataFileIsNotFound) {
  REQUIRE_SAMPLE(dir);
  TempDir tmp;
  copy_sample(dir, tmp);
  ASSERT_EQ(std::remove((tmp / "__1_0.distcp").c_str()), 0);
  auto dcp = DcpCheckpoint::open(tmp.path());
  ASSERT_FALSE(dcp.is_ok());
  EXPECT_EQ(dcp.status().code(), StatusCode::kNotFound);
  EXPECT_NE(dcp.status().message().find("__1_0.distcp"), std::string::npos);
}

// Written by Debian's torch 1.13 (torch.distributed._shard.checkpoint.save_state_dict, no_dist=True)
// through scripts/make_pytorch_fixtures.py; the expected hashes come from the tensors themselves.
nlohmann::json torch113_expected() {
  const auto bytes = testing::read_file_bytes(kDcpTorch113Dir + "/../torch113_expected.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

TEST(DcpCheckpoint, ReadsATorch113Checkpoint) {
  const nlohmann::json expected = torch113_expected();
  auto dcp = DcpCheckpoint::open(kDcpTorch113Dir);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  const DcpMetadata& md = dcp->metadata();
  EXPECT_EQ(md.layout, "torch-1.13");
  EXPECT_EQ(md.version, "");
  bool metadata_class = false;
  for (const PickleGlobal& g : md.globals)
    metadata_class |= g.name == "torch.distributed._shard.checkpoint.metadata.Metadata";
  EXPECT_TRUE(metadata_class);

  // .metadata: every tensor with its dtype and shape, one whole-tensor chunk each (no_dist).
  ASSERT_EQ(md.tensors.size(), expected["tensors"].size());
  for (const auto& e : expected["tensors"]) {
    const std::string name = e["name"];
    auto t =
        std::find_if(md.tensors.begin(), md.tensors.end(), [&](const DcpTensor& x) { return x.fqn == name; });
    ASSERT_NE(t, md.tensors.end()) << name;
    EXPECT_EQ(dtype_name(t->dtype), e["dtype"].get<std::string>()) << name;
    EXPECT_EQ(t->shape, e["shape"].get<std::vector<int64_t>>()) << name;
    ASSERT_EQ(t->chunks.size(), 1u) << name;
    EXPECT_EQ(t->chunks[0].offsets, std::vector<int64_t>(t->shape.size(), 0)) << name;
    EXPECT_EQ(t->chunks[0].sizes, t->shape) << name;
    ASSERT_NE(t->chunks[0].item, SIZE_MAX) << name;
  }
  std::vector<std::string> bytes;
  for (const DcpBytesEntry& b : md.bytes) {
    bytes.push_back(b.fqn);
    ASSERT_NE(b.item, SIZE_MAX) << b.fqn;
    EXPECT_TRUE(md.items[b.item].is_bytes) << b.fqn;
  }
  std::sort(bytes.begin(), bytes.end());
  EXPECT_EQ(bytes, expected["bytes"].get<std::vector<std::string>>());
  for (size_t i = 0; i < md.items.size(); ++i) EXPECT_EQ(dcp->item_bounds_problem(i), "") << i;

  // The payloads: every tensor (and the optimizer's, inside its bytes item) hashes as torch saw it.
  auto files = dcp->tensor_files();
  ASSERT_TRUE(files.is_ok()) << files.status().to_string();
  std::map<std::string, std::pair<const TensorFile*, size_t>> by_name;
  for (const auto& f : *files) {
    EXPECT_TRUE(f->check_container().is_ok()) << f->path();
    for (size_t i = 0; i < f->chunks().size(); ++i) by_name[f->chunks()[i].name] = {f.get(), i};
  }
  size_t checked = 0;
  for (const char* group : {"tensors", "bytes_tensors"}) {
    for (const auto& e : expected[group]) {
      const std::string name = e["name"];
      auto f = by_name.find(name);
      ASSERT_NE(f, by_name.end()) << name;
      const ChunkInfo& c = f->second.first->chunks()[f->second.second];
      EXPECT_EQ(dtype_name(c.dtype), e["dtype"].get<std::string>()) << name;
      EXPECT_EQ(c.shape, e["shape"].get<std::vector<int64_t>>()) << name;
      auto sha = hash_chunk(*f->second.first, f->second.second);
      ASSERT_TRUE(sha.is_ok()) << name << ": " << sha.status().to_string();
      EXPECT_EQ(*sha, e["sha256"].get<std::string>()) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5u);
  EXPECT_EQ(by_name.size(), checked);
}

TEST(DcpMetadata, EveryTruncationOfTheTorch113MetadataFailsCleanly) {
  const auto bytes = testing::read_file_bytes(kDcpTorch113Dir + "/.metadata");
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(parse_dcp_metadata(bytes.data(), n, "x/.metadata").is_ok()) << n;
  EXPECT_TRUE(parse_dcp_metadata(bytes.data(), bytes.size(), "x/.metadata").is_ok());
}

// Found by dcp_fuzz (tests/data/dcp/fuzz-invalid-utf8-global.metadata, fuzz/crashes/README.md): a
// global spelled with invalid UTF-8 was listed raw, and dumping the globals as JSON (inspect --json)
// threw.
TEST(DcpMetadata, FuzzFoundInvalidUtf8GlobalDumpsAsJson) {
  const auto bytes = testing::read_file_bytes(std::string(CKPTCHECK_SOURCE_DIR) +
                                              "/tests/data/dcp/fuzz-invalid-utf8-global.metadata");
  auto md = parse_dcp_metadata(bytes.data(), bytes.size(), "x/.metadata");
  ASSERT_TRUE(md.is_ok()) << md.status().to_string();
  nlohmann::json names = nlohmann::json::array();
  for (const PickleGlobal& g : md->globals) names.push_back(g.name);
  ASSERT_FALSE(md->globals.empty());
  EXPECT_NO_THROW((void)names.dump());
}

TEST(DcpMetadata, AGlobalWithInvalidUtf8IsListedCleanly) {
  auto bytes = testing::read_file_bytes(kDcpTorch113Dir + "/.metadata");
  const std::string from = "_get_layout";
  auto at = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  ASSERT_NE(at, bytes.end());
  at[4] = 0xa7;  // "_get\xa7layout": not UTF-8
  auto md = parse_dcp_metadata(bytes.data(), bytes.size(), "x/.metadata");
  ASSERT_TRUE(md.is_ok()) << md.status().to_string();
  nlohmann::json names = nlohmann::json::array();
  for (const PickleGlobal& g : md->globals) names.push_back(g.name);
  std::string dumped;
  ASSERT_NO_THROW(dumped = names.dump());
  EXPECT_NE(dumped.find("torch.serialization._get\xEF\xBF\xBDlayout"), std::string::npos) << dumped;
}

TEST(DcpMetadata, RejectsAPickleThatIsNotMetadata) {
  // PROTO 2, EMPTY_DICT, STOP: a plain dict.
  const uint8_t pickle[] = {0x80, 0x02, '}', '.'};
  auto md = parse_dcp_metadata(pickle, sizeof(pickle), "x/.metadata");
  ASSERT_FALSE(md.is_ok());
  EXPECT_NE(md.status().message().find("not a DCP Metadata"), std::string::npos) << md.status().message();
}

TEST(DcpMetadata, EveryTruncationOfTheRealMetadataFailsCleanly) {
  REQUIRE_SAMPLE(dir);
  const auto bytes = testing::read_file_bytes(dir + "/.metadata");
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto md = parse_dcp_metadata(bytes.data(), n, "x/.metadata");
    EXPECT_FALSE(md.is_ok()) << n;
  }
  EXPECT_TRUE(parse_dcp_metadata(bytes.data(), bytes.size(), "x/.metadata").is_ok());
}

// DCP's safetensors serialization as torch 2.8.0 writes it. Torch 1.13 cannot write this layout (no
// torch.distributed.checkpoint, no safetensors), so scripts/make_pytorch_fixtures.py builds it from
// the published format: `.metadata` from stand-in classes, each `__<rank>_0.distcp` its bytes items
// then one hand-written safetensors blob whose __metadata__ carries DCP_SHARDING_INFO; and the same
// blobs as a HuggingFaceStorageWriter(save_sharded=True) directory without `.metadata`.
const std::string kSafetensorsDcp = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/safetensors_v28";
const std::string kHfSharded = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/hf_sharded_safetensors";

nlohmann::json safetensors_expected() {
  const auto bytes = testing::read_file_bytes(kSafetensorsDcp + "/../safetensors_v28_expected.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

// Every chunk hashes as the fixture script computed; a tensor split along dim 0 only also hashes
// whole as the concatenation of its chunks in global-offset order.
void expect_safetensors_fixture_tensors(const DcpCheckpoint& dcp) {
  const nlohmann::json e = safetensors_expected();
  const DcpMetadata& md = dcp.metadata();
  ASSERT_EQ(md.tensors.size(), e["tensors"].size());
  auto files = dcp.tensor_files();
  ASSERT_TRUE(files.is_ok()) << files.status().to_string();
  std::map<std::string, std::vector<uint8_t>> bytes_by_label;
  for (const auto& f : *files) {
    EXPECT_TRUE(f->check_container().is_ok()) << f->path();
    for (size_t i = 0; i < f->chunks().size(); ++i) {
      const ChunkInfo& c = f->chunks()[i];
      std::vector<uint8_t> buf(c.data_bytes);
      ASSERT_TRUE(f->read_chunk(i, 0, buf.data(), buf.size()).is_ok()) << c.name;
      bytes_by_label[c.name + shape_to_string(c.offsets)] = std::move(buf);
    }
  }
  for (const auto& et : e["tensors"]) {
    const std::string name = et["name"].get<std::string>();
    auto t =
        std::find_if(md.tensors.begin(), md.tensors.end(), [&](const DcpTensor& x) { return x.fqn == name; });
    ASSERT_NE(t, md.tensors.end()) << name;
    EXPECT_EQ(dtype_name(t->dtype), et["dtype"].get<std::string>()) << name;
    EXPECT_EQ(t->shape, et["shape"].get<std::vector<int64_t>>()) << name;
    ASSERT_EQ(t->chunks.size(), et["chunks"].size()) << name;
    std::vector<uint8_t> whole;
    bool dim0_only = true;
    for (size_t i = 0; i < t->chunks.size(); ++i) {
      const auto& ec = et["chunks"][i];
      EXPECT_EQ(t->chunks[i].offsets, ec["offsets"].get<std::vector<int64_t>>()) << name;
      EXPECT_EQ(t->chunks[i].sizes, ec["sizes"].get<std::vector<int64_t>>()) << name;
      const std::vector<uint8_t>& b = bytes_by_label[name + shape_to_string(t->chunks[i].offsets)];
      EXPECT_EQ(sha256_hex(b.data(), b.size()), ec["sha256"].get<std::string>()) << name;
      for (size_t d = 1; d < t->chunks[i].sizes.size(); ++d)
        dim0_only = dim0_only && t->chunks[i].sizes[d] == t->shape[d];
      whole.insert(whole.end(), b.begin(), b.end());
    }
    if (dim0_only) {
      EXPECT_EQ(sha256_hex(whole.data(), whole.size()), et["sha256"].get<std::string>()) << name;
    }
  }
}

TEST(DcpSafetensors, ReadsTorch28SafetensorsSerialization) {
  auto dcp = DcpCheckpoint::open(kSafetensorsDcp);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  EXPECT_EQ(dcp->metadata().layout, "torch-2.4");
  EXPECT_EQ(dcp->summary()["serialization"], "safetensors");
  EXPECT_EQ(dcp->summary()["safetensors_blobs"][0]["dcp_version"], "1.0");
  // Tensor items are resolved from the blob's start (as recorded) to their bytes, inside the file.
  for (size_t i = 0; i < dcp->metadata().items.size(); ++i) {
    const DcpItem& it = dcp->metadata().items[i];
    EXPECT_EQ(dcp->item_bounds_problem(i), "");
    EXPECT_EQ(dcp->item_problem(i), "");
    EXPECT_EQ(it.safetensors, !it.is_bytes) << it.label();
    if (it.safetensors) {
      EXPECT_EQ(it.recorded_offset, it.container_offset) << it.label();
      EXPECT_GT(it.offset, it.container_offset) << it.label();
    }
  }
  uint64_t b = 0, e = 0;
  ASSERT_TRUE(dcp->safetensors_header_range(0, &b, &e));
  EXPECT_GT(b, 0u);  // after the bytes item
  expect_safetensors_fixture_tensors(*dcp);
}

TEST(DcpSafetensors, ReadsAShardedSafetensorsDirectoryWithoutMetadata) {
  EXPECT_TRUE(is_dcp_directory(kHfSharded));
  EXPECT_TRUE(is_dcp_sharded_safetensors_directory(kHfSharded));
  EXPECT_FALSE(is_dcp_sharded_safetensors_directory(kSafetensorsDcp));
  auto dcp = DcpCheckpoint::open(kHfSharded);
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  EXPECT_EQ(dcp->metadata().layout, "hf-safetensors-sharded");
  expect_safetensors_fixture_tensors(*dcp);
}

void copy_safetensors_dcp(const TempDir& to) {
  for (const char* f : {".metadata", "__0_0.distcp", "__1_0.distcp"})
    testing::write_file_bytes(to / f, testing::read_file_bytes(kSafetensorsDcp + "/" + f));
}

TEST(DcpSafetensors, ATruncatedBlobIsNamed) {
  TempDir dir;
  copy_safetensors_dcp(dir);
  auto bytes = testing::read_file_bytes(dir / "__1_0.distcp");
  bytes.resize(bytes.size() - 10);
  testing::write_file_bytes(dir / "__1_0.distcp", bytes);
  auto dcp = DcpCheckpoint::open(dir.path());
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  auto files = dcp->tensor_files();
  ASSERT_FALSE(files.is_ok());
  EXPECT_EQ(files.status().code(), StatusCode::kTruncated) << files.status().to_string();
  EXPECT_NE(files.status().message().find("__1_0.distcp"), std::string::npos) << files.status().to_string();
}

TEST(DcpSafetensors, ShardingInfoDisagreeingWithMetadataIsCorruption) {
  TempDir dir;
  copy_safetensors_dcp(dir);
  auto bytes = testing::read_file_bytes(dir / "__1_0.distcp");
  std::string text(bytes.begin(), bytes.end());
  // rank 1's chunk of model.layers.0.weight starts at row 2; say row 3 (same byte length).
  const std::string from = R"(\"model.layers.0.weight\": {\"saved_offsets\": [2, 0]})";
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text.substr(0, 400);
  text[at + from.size() - 6] = '3';
  testing::write_file_bytes(dir / "__1_0.distcp", std::vector<uint8_t>(text.begin(), text.end()));
  auto dcp = DcpCheckpoint::open(dir.path());
  ASSERT_TRUE(dcp.is_ok()) << dcp.status().to_string();
  auto files = dcp->tensor_files();
  ASSERT_FALSE(files.is_ok());
  EXPECT_EQ(files.status().code(), StatusCode::kCorruption) << files.status().to_string();
  EXPECT_NE(files.status().message().find("saved_offsets [3, 0] disagree with .metadata's [2, 0]"),
            std::string::npos)
      << files.status().to_string();
}

}  // namespace
}  // namespace ckpt
