#include "formats/pytorch_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/sha256.h"
#include "formats/tensor_file_open.h"
#include "tests/support/byte_mutations.h"
#include "tests/support/pickle_ops.h"
#include "tests/support/test_paths.h"
#include "tests/support/zip_builder.h"

namespace ckpt {
namespace {

using namespace pk;

const std::string kDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/";

nlohmann::json expected() {
  auto text = read_small_file(kDir + "expected.json", 1 << 20);
  EXPECT_TRUE(text.is_ok());
  auto j = parse_json(*text, "expected.json");
  EXPECT_TRUE(j.is_ok());
  return *j;
}

// Every tensor of `file` (opened with `open`) has the name, dtype, shape and row-major bytes torch
// (or numpy) gave it.
void expect_tensors(const std::string& file, const nlohmann::json& tensors) {
  auto r = open_pytorch_file(kDir + file);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& chunks = (*r)->chunks();
  ASSERT_EQ(chunks.size(), tensors.size()) << file;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkInfo& c = chunks[i];
    EXPECT_EQ(c.name, tensors[i]["name"].get<std::string>()) << file;
    EXPECT_EQ(dtype_name(c.dtype), tensors[i]["dtype"].get<std::string>()) << c.name;
    EXPECT_EQ(c.shape, tensors[i]["shape"].get<std::vector<int64_t>>()) << c.name;
    EXPECT_EQ(c.sha256, "") << c.name;  // torch.save stores no hashes: none may be invented
    auto hash = hash_chunk(**r, i);
    ASSERT_TRUE(hash.is_ok()) << hash.status().to_string();
    EXPECT_EQ(*hash, tensors[i]["sha256"].get<std::string>()) << file << ": " << c.name;
  }
}

TEST(PytorchFile, StridedLegacyAndNumpyFixturesMatchWhatTorchSaved) {
  const nlohmann::json want = expected();
  expect_tensors("strided.pt", want["files"]["strided.pt"]);
  ASSERT_EQ(want["legacy"].size(), 1u);
  for (const auto& [file, tensors] : want["legacy"].items()) expect_tensors(file, tensors);
  nlohmann::json lightning = want["files"]["lightning_like.ckpt"];
  for (const auto& t : want["numpy"]["lightning_like.ckpt"]) lightning.push_back(t);
  expect_tensors("lightning_like.ckpt", lightning);
}

TEST(PytorchFile, StridedViewsAreGatheredAndNotMapped) {
  auto r = open_pytorch_file(kDir + "strided.pt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->payload_source(), nullptr);  // a loader must not map a strided view as rows
  // "offset_strided" is arange(40).view(4, 10)[:, 1:8:2]: 1, 3, 5, 7, 11, ...
  const ChunkInfo& c = (*r)->chunks()[2];
  ASSERT_EQ(c.name, "offset_strided");
  float got[16];
  ASSERT_TRUE((*r)->read_chunk(2, 0, got, sizeof got).is_ok());
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[3], 7.0f);
  EXPECT_EQ(got[4], 11.0f);
  EXPECT_EQ(got[15], 37.0f);
  float tail[2];  // a read that starts inside the view
  ASSERT_TRUE((*r)->read_chunk(2, 56, tail, sizeof tail).is_ok());
  EXPECT_EQ(tail[0], 35.0f);
}

TEST(PytorchFile, RealLegacyFileFromPicklescanReads) {
  // mmaitre314/picklescan tests/data/pytorch_model.bin (see ../shared/realworld-samples/README.md).
  const std::string path =
      std::string(CKPTCHECK_SOURCE_DIR) + "/../shared/realworld-samples/torch-legacy/pytorch_model.bin";
  if (!path_exists(path)) GTEST_SKIP() << path << " is not here";
  auto r = open_tensor_file(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& chunks = (*r)->chunks();
  ASSERT_EQ(chunks.size(), 38u);
  EXPECT_EQ(chunks[0].name, "distilbert.embeddings.word_embeddings.weight");
  EXPECT_EQ(chunks[0].shape, (std::vector<int64_t>{28996, 2}));
  EXPECT_EQ(*hash_chunk(**r, 0), "ce2bde62efce8bb8680e3a6ada723bd82e00d07766cb8e8efab67e389639640c");
  EXPECT_EQ(chunks[37].name, "qa_outputs.bias");
  EXPECT_EQ(*hash_chunk(**r, 37), "af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc");
  EXPECT_NE((*r)->payload_source(), nullptr);  // every tensor is a plain range of the file
}

TEST(PytorchFile, LightningShapedCheckpointKeepsItsObjectsAsData) {
  auto r = open_pytorch_file(kDir + "lightning_like.ckpt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const nlohmann::json& m = (*r)->metadata();
  EXPECT_EQ(m["hyper_parameters"], (nlohmann::json{{"lr", 0.001}, {"hidden", 6}, {"name", "tiny"}}));
  EXPECT_EQ(m["loss_fn"], "global:torch.nn.functional.cross_entropy");
  EXPECT_EQ(m["callbacks.ModelCheckpoint.best_model_score"], 0.25);
  EXPECT_EQ(m["callbacks.ModelCheckpoint.best_k"], 7);
  EXPECT_EQ(m["epoch"], 3);
  std::map<std::string, std::string> risk;
  for (const auto& g : (*r)->pickle_globals()) risk[g.name] = pickle_global_risk_name(g.risk);
  EXPECT_EQ(risk["argparse.Namespace"], "executes");
  EXPECT_EQ(risk["torch.nn.functional.cross_entropy"], "executes");
  EXPECT_EQ(risk["numpy.core.multiarray._reconstruct"], "safe");
  EXPECT_EQ(risk["torch._utils._rebuild_tensor_v2"], "safe");
}

TEST(PytorchFile, TrainingArgumentsFileWithoutTensorsIsDescribed) {
  auto r = open_tensor_file(kDir + "training_args.bin");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE((*r)->chunks().empty());
  const nlohmann::json& v = (*r)->metadata()["value"];
  EXPECT_EQ(v["__class__"], "transformers.training_args.TrainingArguments");
  EXPECT_EQ(v["output_dir"], "out");
  EXPECT_DOUBLE_EQ(v["learning_rate"].get<double>(), 5e-5);
  EXPECT_EQ(v["report_to"], (nlohmann::json{"none"}));
  ASSERT_EQ((*r)->pickle_globals().size(), 1u);
  EXPECT_EQ((*r)->pickle_globals()[0].risk, PickleGlobalRisk::kExecutes);
}

TEST(PytorchFile, FixturesMatchWhatTorchSaved) {
  const nlohmann::json want = expected();
  ASSERT_GE(want["files"].size(), 2u);
  for (const auto& [file, tensors] : want["files"].items()) {
    if (file == "lightning_like.ckpt" || file == "strided.pt") continue;  // above: numpy, strides
    expect_tensors(file, tensors);
  }
}

TEST(PytorchFile, OptimizerStateFlattensWithMetadata) {
  auto r = open_pytorch_file(kDir + "adamw_state.pt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->chunks()[1].name, "state.0.exp_avg");
  EXPECT_EQ((*r)->chunks()[1].component, "optimizer");
  const auto& groups = (*r)->metadata()["param_groups"];
  ASSERT_TRUE(groups.is_array());
  EXPECT_DOUBLE_EQ(groups[0]["lr"].get<double>(), 1e-3);
  EXPECT_EQ(groups[0]["params"].size(), 4u);
}

TEST(PytorchFile, MaliciousFixturesAreReadInertlyAndTheirGlobalFlaggedDangerous) {
  // os.system (saved as posix.system), eval, exec and subprocess.check_call (saved as
  // commands.check_call), each of which would touch the sentinel under torch.load(weights_only=False).
  ::unlink("/tmp/ckptcheck_fixture_was_executed");
  const nlohmann::json want = expected();
  ASSERT_EQ(want["malicious"].size(), 4u);
  for (const auto& [file, global] : want["malicious"].items()) {
    auto r = open_tensor_file(kDir + file);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_EQ((*r)->chunks().size(), 1u) << file;
    EXPECT_EQ((*r)->chunks()[0].name, "weight");
    EXPECT_EQ((*r)->metadata()["x"]["__call__"], global) << file;
    EXPECT_NE((*r)->metadata()["x"]["__args__"].dump().find("ckptcheck_fixture_was_executed"),
              std::string::npos);
    bool flagged = false;
    for (const auto& g : (*r)->pickle_globals())
      flagged = flagged || (g.name == global && g.risk == PickleGlobalRisk::kDangerous);
    EXPECT_TRUE(flagged) << file << ": " << global;
    for (size_t i = 0; i < (*r)->chunks().size(); ++i) EXPECT_TRUE(hash_chunk(**r, i).is_ok());
    EXPECT_TRUE((*r)->check_container().is_ok());
  }
  EXPECT_FALSE(path_exists("/tmp/ckptcheck_fixture_was_executed"));
}

// A torch.save-shaped zip around a pickle holding one 2x2 F32 tensor 'w' over storage "0".
std::vector<uint8_t> torch_zip(const std::string& tensor_ops, const std::string& storage_bytes,
                               const std::string& byteorder = "little", uint16_t method = 0) {
  const std::string pkl = proto() + empty_dict() + mark() + str("w") + tensor_ops + setitems() + stop();
  return build_zip({{"arch/data.pkl", pkl}, {"arch/byteorder", byteorder}, {"arch/data/0", storage_bytes}},
                   {false, method});
}

Result<std::unique_ptr<TensorFile>> open_pytorch_bytes(std::vector<uint8_t> b) {
  return open_pytorch(std::make_unique<MemoryByteSource>(std::move(b), "m.pt"));
}

void expect_pytorch_error(std::vector<uint8_t> b, StatusCode code, const std::string& needle) {
  auto r = open_pytorch_bytes(std::move(b));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("m.pt"), std::string::npos) << r.status().to_string();
}

TEST(PytorchFile, StorageOffsetViewPointsIntoTheEntry) {
  std::string storage(24, '\0');
  for (int i = 0; i < 24; ++i) storage[i] = static_cast<char>(i);
  auto b = torch_zip(tensor2d(pk::storage("FloatStorage", "0", 6), 2, 2, 2, 2, 1), storage);
  auto r = open_pytorch_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::vector<uint8_t> got(16);
  ASSERT_TRUE((*r)->read_chunk(0, 0, got.data(), got.size()).is_ok());
  EXPECT_EQ(got[0], 8);  // element 2 of the storage
  EXPECT_EQ(got[15], 23);
}

TEST(PytorchDefects, CompressedEntry) {
  expect_pytorch_error(
      torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0), "little", 8),
      StatusCode::kNotSupported, "compression method 8");
}

TEST(PytorchDefects, NoDataPkl) {
  expect_pytorch_error(build_zip({{"arch/other", "x"}}), StatusCode::kNotSupported, "no <archive>/data.pkl");
}

TEST(PytorchDefects, BigEndian) {
  expect_pytorch_error(
      torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0), "big"),
      StatusCode::kNotSupported, "byteorder 'big'");
}

TEST(PytorchDefects, MissingStorageEntry) {
  expect_pytorch_error(
      torch_zip(tensor2d(storage("FloatStorage", "9", 4), 0, 2, 2, 2, 1), std::string(16, 0)),
      StatusCode::kCorruption, "tensor 'w': storage entry 'arch/data/9' is missing");
}

TEST(PytorchDefects, StorageSizeMismatch) {
  expect_pytorch_error(
      torch_zip(tensor2d(storage("DoubleStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0)),
      StatusCode::kCorruption, "should hold 4 F64 elements, entry has 16 bytes");
}

TEST(PytorchFile, TransposedViewIsGathered) {
  std::string storage_bytes;
  for (float v : {0.f, 1.f, 2.f, 3.f}) storage_bytes.append(reinterpret_cast<const char*>(&v), 4);
  auto r =
      open_pytorch_bytes(torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 1, 2), storage_bytes));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  float got[4];
  ASSERT_TRUE((*r)->read_chunk(0, 0, got, sizeof got).is_ok());
  EXPECT_EQ(std::vector<float>(got, got + 4), (std::vector<float>{0, 2, 1, 3}));
}

TEST(PytorchDefects, StridedViewPastStorage) {
  expect_pytorch_error(
      torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 1, 3), std::string(16, 0)),
      StatusCode::kCorruption, "reaches element 4, past the storage's 4 elements");
}

TEST(PytorchDefects, StrideOverflow) {
  // BININT 0x7fffffff strides in both dims of a 255 x 255 view.
  const std::string big = std::string("J\xff\xff\xff\x7f", 5);
  const std::string ops = global("torch._utils", "_rebuild_tensor_v2") + mark() +
                          storage("FloatStorage", "0", 4) + int1(0) + int1(255) + int1(255) + tuple2() + big +
                          big + tuple2() + newfalse() + global("collections", "OrderedDict") + empty_tuple() +
                          reduce() + tuple() + reduce();
  expect_pytorch_error(torch_zip(ops, std::string(16, 0)), StatusCode::kCorruption,
                       "past the storage's 4 elements");
}

TEST(PytorchDefects, CrcMismatchNamesTheMember) {
  auto bytes = torch_zip(tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1), std::string(16, 0));
  uint64_t at = 0;
  {
    auto clean = open_pytorch_bytes(bytes);
    ASSERT_TRUE(clean.is_ok()) << clean.status().to_string();
    EXPECT_TRUE((*clean)->check_container().is_ok()) << (*clean)->check_container().to_string();
    at = (*clean)->chunks()[0].data_offset + 5;
  }
  bytes[at] ^= 0x40;  // inside arch/data/0
  auto r = open_pytorch_bytes(bytes);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();  // torch.load would not notice either
  const Status st = (*r)->check_container();
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("zip member 'arch/data/0' (16 bytes at 0x"), std::string::npos)
      << st.to_string();
  EXPECT_NE(st.message().find("CRC-32 mismatch"), std::string::npos) << st.to_string();
}

TEST(PytorchDefects, FlippedByteInARealFixtureStorageIsCaughtByCrc) {
  std::ifstream f(kDir + "model_state.pt", std::ios::binary);
  std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(f), {});
  auto clean = open_pytorch_bytes(bytes);
  ASSERT_TRUE(clean.is_ok());
  ASSERT_TRUE((*clean)->check_container().is_ok()) << (*clean)->check_container().to_string();
  const ChunkInfo& c = (*clean)->chunks()[0];
  bytes[c.data_offset + 3] ^= 1;
  auto r = open_pytorch_bytes(bytes);
  ASSERT_TRUE(r.is_ok());
  const Status st = (*r)->check_container();
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("zip member 'model_state/data/"), std::string::npos) << st.to_string();
}

TEST(PytorchDefects, TrailingGarbageAfterTheZip) {
  std::ifstream f(kDir + "model_state.pt", std::ios::binary);
  std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(f), {});
  bytes.insert(bytes.end(), {'j', 'u', 'n', 'k'});
  expect_pytorch_error(bytes, StatusCode::kCorruption, "4 bytes after the zip end record");
}

TEST(PytorchDefects, TruncatedZip) {
  std::ifstream f(kDir + "model_state.pt", std::ios::binary);
  std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(f), {});
  bytes.resize(bytes.size() - 100);
  expect_pytorch_error(bytes, StatusCode::kTruncated, "truncated");
}

Result<std::unique_ptr<TensorFile>> open_legacy_bytes(std::vector<uint8_t> b) {
  return open_pytorch_legacy(std::make_unique<MemoryByteSource>(std::move(b), "legacy.pt"));
}

std::vector<uint8_t> legacy_fixture() {
  std::ifstream f(kDir + "legacy_model_state.pt", std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(PytorchLegacyDefects, TruncatedInsideAStorage) {
  auto b = legacy_fixture();
  b.resize(b.size() - 5);
  auto r = open_legacy_bytes(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTruncated) << r.status().to_string();
  EXPECT_NE(r.status().message().find("legacy.pt @"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("storage '"), std::string::npos) << r.status().to_string();
}

TEST(PytorchLegacyDefects, TruncatedInsideThePickle) {
  auto b = legacy_fixture();
  b.resize(300);
  auto r = open_legacy_bytes(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTruncated) << r.status().to_string();
  EXPECT_NE(r.status().message().find("legacy.pt: object pickle"), std::string::npos)
      << r.status().to_string();
}

TEST(PytorchLegacyDefects, BigEndianWriter) {
  auto b = legacy_fixture();
  const std::string text = "little_endianq\x02\x88";
  const std::vector<uint8_t> marker(text.begin(), text.end());
  auto it = std::search(b.begin(), b.end(), marker.begin(), marker.end());
  ASSERT_NE(it, b.end());
  *(it + static_cast<std::ptrdiff_t>(marker.size()) - 1) = 0x89;  // NEWFALSE
  auto r = open_legacy_bytes(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(r.status().message().find("big-endian"), std::string::npos) << r.status().to_string();
}

TEST(PytorchLegacyDefects, TrailingBytes) {
  auto b = legacy_fixture();
  b.push_back(0);
  auto r = open_legacy_bytes(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("1 bytes after the last storage"), std::string::npos)
      << r.status().to_string();
}

TEST(PytorchLegacy, MutationsNeverCrash) {
  const auto valid = legacy_fixture();
  std::mt19937_64 rng(7);
  int opened = 0;
  for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
    auto r = open_legacy_bytes(mutate(valid, rng));
    if (!r.is_ok()) continue;
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      if ((*r)->chunks()[c].data_bytes > (64u << 20)) continue;
      EXPECT_TRUE(hash_chunk(**r, c).is_ok());
    }
    (void)(*r)->metadata().dump();
  }
  EXPECT_GT(opened, 0);
}

TEST(PytorchDefects, ViewPastStorage) {
  expect_pytorch_error(
      torch_zip(tensor2d(storage("FloatStorage", "0", 4), 1, 2, 2, 2, 1), std::string(16, 0)),
      StatusCode::kCorruption, "reaches element 4, past the storage's 4 elements");
}

TEST(PytorchFile, DangerousGlobalInsideZipIsAPlaceholder) {
  auto r = open_pytorch_bytes(
      torch_zip(global("os", "system") + str("x") + "\x85" + reduce(), std::string(16, 0)));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->metadata()["value"]["w"]["__call__"], "os.system");  // no tensor: the whole dict
  ASSERT_EQ((*r)->pickle_globals().size(), 1u);
  EXPECT_EQ((*r)->pickle_globals()[0].risk, PickleGlobalRisk::kDangerous);
}

TEST(PytorchFile, MutationsNeverCrash) {
  std::ifstream f(kDir + "model_state.pt", std::ios::binary);
  const std::vector<uint8_t> valid(std::istreambuf_iterator<char>(f), {});
  ASSERT_GT(valid.size(), 1000u);
  std::mt19937_64 rng(99);
  int opened = 0;
  for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
    auto r = open_pytorch_bytes(mutate(valid, rng));
    if (!r.is_ok()) continue;
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      if ((*r)->chunks()[c].data_bytes > (64u << 20)) continue;  // a mutated stride-0 view may be huge
      std::vector<uint8_t> buf((*r)->chunks()[c].data_bytes);
      EXPECT_TRUE((*r)->read_chunk(c, 0, buf.data(), buf.size()).is_ok());
    }
    (void)(*r)->metadata().dump();
  }
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace ckpt

namespace ckpt {
namespace {

// torch.jit.save of a scripted module (scripts/make_pytorch_fixtures.py --only torchscript): the
// tensors torch.jit.load gives, the code/ members named, their deflated bytes checked by CRC-32.
TEST(PytorchFile, TorchScriptArchiveListsItsTensorsAndCodeAndChecksItsDeflatedMembers) {
  auto text = read_small_file(kDir + "torchscript_expected.json", 1 << 20);
  ASSERT_TRUE(text.is_ok());
  const auto want = nlohmann::json::parse(*text);
  auto r = open_pytorch_file(kDir + "torchscript_tiny.pt");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const TensorFile& file = **r;
  EXPECT_STREQ(file.format_name(), "torchscript");
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < file.chunks().size(); ++i) index[file.chunks()[i].name] = i;
  ASSERT_EQ(index.size(), want["tensors"].size());
  for (const auto& t : want["tensors"]) {
    const auto it = index.find(t["name"].get<std::string>());
    ASSERT_NE(it, index.end()) << t.dump();
    const ChunkInfo& c = file.chunks()[it->second];
    EXPECT_EQ(dtype_name(c.dtype), t["dtype"].get<std::string>());
    EXPECT_EQ(c.shape, t["shape"].get<std::vector<int64_t>>());
    auto hash = hash_chunk(file, it->second);
    ASSERT_TRUE(hash.is_ok()) << hash.status().to_string();
    EXPECT_EQ(*hash, t["sha256"].get<std::string>()) << c.name;
  }
  EXPECT_EQ(file.metadata()["torchscript_code"], want["code_files"]);
  bool scripted_class = false;
  for (const auto& g : file.pickle_globals())
    scripted_class = scripted_class || g.name == "__torch__.TinyScripted";
  EXPECT_TRUE(scripted_class);
  EXPECT_TRUE(file.check_container().is_ok()) << file.check_container().to_string();
  // A flipped byte inside a deflated code member: its inflated CRC-32 (or the stream) says so.
  auto raw = read_small_file(kDir + "torchscript_tiny.pt", 1 << 20);
  ASSERT_TRUE(raw.is_ok());
  std::vector<uint8_t> bytes(raw->begin(), raw->end());
  MemoryByteSource source(bytes);
  auto zip = ZipArchive::open(source);
  ASSERT_TRUE(zip.is_ok()) << zip.status().to_string();
  const ZipEntry* code = nullptr;
  for (const auto& e : zip->entries()) {
    if (e.method == kZipDeflated && !code) code = &e;
  }
  ASSERT_NE(code, nullptr);
  bytes[code->data_offset + code->compressed_size / 2] ^= 0x01;
  auto damaged = open_pytorch(std::make_unique<MemoryByteSource>(bytes));
  ASSERT_TRUE(damaged.is_ok()) << damaged.status().to_string();
  const Status st = (*damaged)->check_container();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(code->name), std::string::npos) << st.to_string();
  // torch.save never compresses: a deflated data.pkl or storage is still refused.
  const auto stored = build_zip({{"m/data.pkl", proto() + empty_dict() + stop()}}, {false, kZipDeflated});
  MemoryByteSource deflated(stored);
  EXPECT_EQ(ZipArchive::open(deflated).status().code(), StatusCode::kNotSupported);
}

}  // namespace
}  // namespace ckpt
