#include "formats/safetensors_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "base/file_io.h"
#include "base/sha256.h"
#include "tests/support/byte_mutations.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A safetensors file from a header object and a data section, with correct length and padding.
std::vector<uint8_t> make_file(const nlohmann::json& header, const std::string& data, size_t pad_to = 8) {
  std::string text = header.dump();
  text.append((pad_to - text.size() % pad_to) % pad_to, ' ');
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Result<std::unique_ptr<TensorFile>> open_safetensors_bytes(std::vector<uint8_t> bytes) {
  return open_safetensors(std::make_unique<MemoryByteSource>(std::move(bytes), "t.safetensors"));
}

nlohmann::json two_tensors() {
  return {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
          {"b", {{"dtype", "I16"}, {"shape", {1, 2}}, {"data_offsets", {8, 12}}}}};
}

void expect_safetensors_error(std::vector<uint8_t> bytes, StatusCode code, const std::string& needle) {
  auto r = open_safetensors_bytes(std::move(bytes));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("t.safetensors"), std::string::npos) << r.status().to_string();
}

TEST(Safetensors, PlainHuggingFaceFileOpensAsWholeTensors) {
  auto r = open_safetensors_bytes(make_file(two_tensors(), std::string(12, '\x01')));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& chunks = (*r)->chunks();
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].name, "a");
  EXPECT_EQ(chunks[0].component, "model");
  EXPECT_EQ(chunks[0].sha256, "");
  EXPECT_EQ(chunks[1].dtype, DType::kI16);
  EXPECT_EQ(chunks[1].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(chunks[1].global_shape, chunks[1].shape);
  const uint64_t header_len = make_file(two_tensors(), "").size() - 8;
  EXPECT_EQ(chunks[1].data_offset, 8 + header_len + 8);
}

TEST(Safetensors, RoundTripKeepsBytesHashesAndChunkFacts) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  std::vector<uint16_t> bf = {0x3f80, 0x4000, 0xc040};
  ChunkPayload a{{"model.w", "model", DType::kF32, {4, 6}, {2, 0}, {2, 6}, 0, 48, ""},
                 reinterpret_cast<const uint8_t*>(w.data())};
  ChunkPayload b{{"optimizer.m", "optimizer", DType::kBF16, {3}, {0}, {3}, 0, 6, ""},
                 reinterpret_cast<const uint8_t*>(bf.data())};
  const nlohmann::json meta = {{"step", 42}, {"shard_index", 1}, {"shard_count", 2}};
  auto written = write_safetensors_file(dir + "/s.safetensors", {a, b}, meta);
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
  // The digest is the header's (length field + JSON), which holds every payload's SHA-256.
  EXPECT_EQ(written->sha256_of, "header");
  auto source = FileByteSource::open(dir + "/s.safetensors");
  ASSERT_TRUE(source.is_ok());
  EXPECT_EQ(written->sha256, *safetensors_header_digest(**source));
  EXPECT_EQ(written->bytes, (*source)->size());
  // Padded with spaces so that the data section, and so the first payload, starts on a page.
  EXPECT_EQ(written->chunks[0].data_offset % 4096, 0u);

  auto r = open_safetensors_file(dir + "/s.safetensors");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->metadata(), meta);
  ASSERT_EQ((*r)->chunks().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ChunkInfo& got = (*r)->chunks()[i];
    const ChunkInfo& want = written->chunks[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.component, want.component);
    EXPECT_EQ(got.global_shape, want.global_shape);
    EXPECT_EQ(got.offsets, want.offsets);
    EXPECT_EQ(got.data_offset, want.data_offset);
    EXPECT_EQ(got.sha256, want.sha256);
    std::vector<uint8_t> bytes(got.data_bytes);
    ASSERT_TRUE((*r)->read_chunk(i, 0, bytes.data(), bytes.size()).is_ok());
    EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()), want.sha256);
  }
  EXPECT_EQ(written->chunks[0].sha256, sha256_hex(w.data(), 48));
  // Never overwrites.
  EXPECT_FALSE(write_safetensors_file(dir + "/s.safetensors", {a}, meta).is_ok());
}

TEST(Safetensors, WriterRejectsInconsistentChunk) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  uint8_t data[8] = {};
  ChunkPayload bad{{"x", "model", DType::kF32, {4}, {2}, {3}, 0, 12, ""}, data};  // 2 + 3 > 4
  EXPECT_EQ(write_safetensors_file(dir + "/x.safetensors", {bad}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SafetensorsDefects, TooShortForLength) {
  expect_safetensors_error({1, 2, 3}, StatusCode::kTruncated, "at least 8");
}

TEST(SafetensorsDefects, HeaderLongerThanLimit) {
  std::vector<uint8_t> b(16, 0);
  const uint64_t n = kSafetensorsMaxHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  expect_safetensors_error(b, StatusCode::kCorruption, "exceeds the limit");
}

TEST(SafetensorsDefects, HeaderLongerThanFile) {
  auto b = make_file(two_tensors(), std::string(12, 0));
  b[0] = 0xf0;
  b[1] = 0xff;
  expect_safetensors_error(b, StatusCode::kTruncated, "header length");
}

TEST(SafetensorsDefects, HeaderNotJson) {
  std::vector<uint8_t> b = {8, 0, 0, 0, 0, 0, 0, 0, '{', 'x', ' ', ' ', ' ', ' ', ' ', ' '};
  expect_safetensors_error(b, StatusCode::kCorruption, "not valid JSON");
}

TEST(SafetensorsDefects, HeaderNotUtf8) {
  nlohmann::json h = two_tensors();
  auto b = make_file(h, std::string(12, 0));
  // Replace the 'a' key (inside quotes) with an invalid UTF-8 byte.
  for (size_t i = 9; i + 2 < b.size(); ++i) {
    if (b[i] == '"' && b[i + 1] == 'a' && b[i + 2] == '"') {
      b[i + 1] = 0xff;
      break;
    }
  }
  expect_safetensors_error(b, StatusCode::kCorruption, "not valid JSON");
}

TEST(SafetensorsDefects, HeaderNotAnObject) {
  expect_safetensors_error(make_file(nlohmann::json::array(), ""), StatusCode::kCorruption, "'{'");
}

TEST(SafetensorsDefects, DeepNesting) {
  std::string deep(200, '[');
  nlohmann::json h = two_tensors();
  std::string text = "{\"x\":" + deep + std::string(200, ']') + "}";
  std::vector<uint8_t> b(8);
  text.append((8 - text.size() % 8) % 8, ' ');
  b[0] = static_cast<uint8_t>(text.size());
  b[1] = static_cast<uint8_t>(text.size() >> 8);
  b.insert(b.end(), text.begin(), text.end());
  expect_safetensors_error(b, StatusCode::kCorruption, "nests deeper");
}

TEST(SafetensorsDefects, UnknownDtype) {
  auto h = two_tensors();
  h["a"]["dtype"] = "Q4_K";
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kNotSupported,
                           "tensor 'a': unknown dtype 'Q4_K'");
}

TEST(Safetensors, EveryDtypeOfTheSpecOpensWithItsElementSize) {
  const std::pair<const char*, size_t> dtypes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  nlohmann::json h = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, size] : dtypes) {
    h[std::string("t_") + name] = {
        {"dtype", name}, {"shape", {3}}, {"data_offsets", {offset, offset + 3 * size}}};
    offset += 3 * size;
  }
  auto r = open_safetensors_bytes(make_file(h, std::string(offset, '\x01')));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)->chunks().size(), std::size(dtypes));
  for (const ChunkInfo& c : (*r)->chunks()) {
    EXPECT_EQ("t_" + std::string(dtype_name(c.dtype)), c.name);
    EXPECT_EQ(c.data_bytes, 3 * dtype_size(c.dtype)) << c.name;
  }
}

TEST(DType, NewDtypesDecode) {
  const uint8_t u16[2] = {0x34, 0x12}, u32[4] = {0xff, 0xff, 0xff, 0xff};
  const uint8_t u64[8] = {0, 0, 0, 0, 0, 0, 0, 0x80};
  EXPECT_EQ(element_as_double(u16, DType::kU16), 0x1234);
  EXPECT_EQ(element_as_double(u32, DType::kU32), 4294967295.0);
  EXPECT_EQ(element_as_double(u64, DType::kU64), 9223372036854775808.0);
  const uint8_t e4m3_max = 0x7e, e4m3_nan = 0xff, e4m3_one = 0x38, e4m3_tiny = 0x01;
  EXPECT_EQ(element_as_double(&e4m3_max, DType::kF8E4M3), 448.0);
  EXPECT_EQ(element_as_double(&e4m3_one, DType::kF8E4M3), 1.0);
  EXPECT_EQ(element_as_double(&e4m3_tiny, DType::kF8E4M3), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(element_as_double(&e4m3_nan, DType::kF8E4M3)));
  const uint8_t e5m2_inf = 0x7c, e5m2_nan = 0x7e, e5m2_max = 0x7b, e5m2_m2 = 0xc0;
  EXPECT_TRUE(std::isinf(element_as_double(&e5m2_inf, DType::kF8E5M2)));
  EXPECT_TRUE(std::isnan(element_as_double(&e5m2_nan, DType::kF8E5M2)));
  EXPECT_EQ(element_as_double(&e5m2_max, DType::kF8E5M2), 57344.0);
  EXPECT_EQ(element_as_double(&e5m2_m2, DType::kF8E5M2), -2.0);
  EXPECT_TRUE(dtype_is_floating(DType::kF8E4M3));
  EXPECT_FALSE(dtype_is_floating(DType::kU64));
  EXPECT_EQ(*dtype_from_name("F8_E5M2"), DType::kF8E5M2);
}

// torch 2.x's other 8-bit floats and the complex types (values as ml_dtypes and torch define them).
TEST(DType, FnuzE8M0ComplexAndTorchNamesDecode) {
  const uint8_t fnuz_one = 0x40, fnuz_nan = 0x80, fnuz_max = 0x7f, fnuz_tiny = 0x01, fnuz_m1 = 0xc0;
  EXPECT_EQ(element_as_double(&fnuz_one, DType::kF8E4M3Fnuz), 1.0);
  EXPECT_EQ(element_as_double(&fnuz_max, DType::kF8E4M3Fnuz), 240.0);
  EXPECT_EQ(element_as_double(&fnuz_tiny, DType::kF8E4M3Fnuz), std::ldexp(1.0, -10));
  EXPECT_EQ(element_as_double(&fnuz_m1, DType::kF8E4M3Fnuz), -1.0);
  EXPECT_TRUE(std::isnan(element_as_double(&fnuz_nan, DType::kF8E4M3Fnuz)));
  EXPECT_EQ(element_as_double(&fnuz_one, DType::kF8E5M2Fnuz), 1.0);
  EXPECT_EQ(element_as_double(&fnuz_max, DType::kF8E5M2Fnuz), 57344.0);
  EXPECT_EQ(element_as_double(&fnuz_tiny, DType::kF8E5M2Fnuz), std::ldexp(1.0, -17));
  EXPECT_TRUE(std::isnan(element_as_double(&fnuz_nan, DType::kF8E5M2Fnuz)));
  const uint8_t e8m0_one = 127, e8m0_min = 0, e8m0_nan = 0xff;
  EXPECT_EQ(element_as_double(&e8m0_one, DType::kF8E8M0), 1.0);
  EXPECT_EQ(element_as_double(&e8m0_min, DType::kF8E8M0), std::ldexp(1.0, -127));
  EXPECT_TRUE(std::isnan(element_as_double(&e8m0_nan, DType::kF8E8M0)));
  const float c64[2] = {3.0f, -4.0f};
  const double c128[2] = {-6.0, 8.0};
  EXPECT_EQ(element_as_double(reinterpret_cast<const uint8_t*>(c64), DType::kC64), 5.0);
  EXPECT_EQ(element_as_double(reinterpret_cast<const uint8_t*>(c128), DType::kC128), 10.0);
  EXPECT_EQ(dtype_size(DType::kC32), 4u);
  EXPECT_EQ(dtype_size(DType::kC128), 16u);
  EXPECT_FALSE(dtype_is_floating(DType::kC64));  // compared bit for bit
  EXPECT_EQ(*dtype_from_torch_name("complex64"), DType::kC64);
  EXPECT_EQ(*dtype_from_torch_name("half"), DType::kF16);
  EXPECT_EQ(*dtype_from_torch_name("float4_e2m1fn_x2"), DType::kF4E2M1X2);
  EXPECT_FALSE(dtype_from_torch_name("quint8").has_value());
  EXPECT_EQ(torch_dtype_name(DType::kF8E8M0), "torch.float8_e8m0fnu");
  EXPECT_EQ(torch_dtype_name(DType::kF32), "torch.float32");
  EXPECT_FALSE(dtype_from_name("F4").has_value());  // safetensors' F4 counts nibbles: only its reader maps it
}

TEST(SafetensorsDefects, DtypeWrongJsonType) {
  auto h = two_tensors();
  h["a"]["dtype"] = 7;
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption,
                           "'dtype': expected a string");
}

TEST(SafetensorsDefects, NegativeShape) {
  auto h = two_tensors();
  h["a"]["shape"] = {-2};
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption, "non-negative");
}

TEST(SafetensorsDefects, ShapeOverflow) {
  auto h = two_tensors();
  h["a"]["shape"] = {uint64_t{1} << 40, uint64_t{1} << 40};
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption, "overflows");
}

TEST(SafetensorsDefects, SizeDoesNotMatchShape) {
  auto h = two_tensors();
  h["a"]["shape"] = {3};
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption,
                           "expected 12 bytes for F32 [3], data_offsets span 8");
}

TEST(SafetensorsDefects, BeginAfterEnd) {
  auto h = two_tensors();
  h["a"]["data_offsets"] = {8, 0};
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption, "begin 8 > end 0");
}

TEST(SafetensorsDefects, Overlap) {
  auto h = two_tensors();
  h["b"]["data_offsets"] = {6, 10};
  expect_safetensors_error(make_file(h, std::string(10, 0)), StatusCode::kCorruption, "overlaps");
}

TEST(SafetensorsDefects, Hole) {
  auto h = two_tensors();
  h["b"]["data_offsets"] = {10, 14};
  expect_safetensors_error(make_file(h, std::string(14, 0)), StatusCode::kCorruption, "hole");
}

TEST(SafetensorsDefects, DataPastEndOfFile) {
  expect_safetensors_error(make_file(two_tensors(), std::string(10, 0)), StatusCode::kTruncated,
                           "data section has 10 bytes");
}

TEST(SafetensorsDefects, BytesAfterLastTensor) {
  expect_safetensors_error(make_file(two_tensors(), std::string(13, 0)), StatusCode::kCorruption,
                           "1 bytes after the last tensor 'b'");
}

TEST(SafetensorsDefects, MetadataValueNotString) {
  auto h = two_tensors();
  h["__metadata__"] = {{"format", 3}};
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption,
                           "__metadata__ 'format'");
}

TEST(SafetensorsDefects, ChunkMetadataOutsideGlobalShape) {
  auto h = two_tensors();
  h["__metadata__"] = {
      {"ckptcheck_chunk:a",
       nlohmann::json{
           {"name", "w"}, {"component", "model"}, {"global_shape", {4}}, {"offsets", {3}}, {"sha256", ""}}
           .dump()}};
  expect_safetensors_error(make_file(h, std::string(12, 0)), StatusCode::kCorruption,
                           "exceeds global size 4");
}

TEST(SafetensorsFuzz, MutationsNeverCrash) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  std::vector<float> w(16, 1.25f);
  ChunkPayload a{{"model.w", "model", DType::kF32, {8, 2}, {0, 0}, {8, 2}, 0, 64, ""},
                 reinterpret_cast<const uint8_t*>(w.data())};
  ChunkPayload b{{"model.v", "model", DType::kF32, {8, 4}, {0, 2}, {8, 2}, 0, 64, ""},
                 reinterpret_cast<const uint8_t*>(w.data())};
  ASSERT_TRUE(write_safetensors_file(dir + "/f.safetensors", {a, b}, {{"step", 1}}).is_ok());
  const auto valid = file_bytes(dir + "/f.safetensors");
  std::mt19937_64 rng(20240611);
  int opened = 0;
  for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
    auto r = open_safetensors_bytes(mutate(valid, rng));
    if (!r.is_ok()) continue;
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      std::vector<uint8_t> buf((*r)->chunks()[c].data_bytes);
      EXPECT_TRUE((*r)->read_chunk(c, 0, buf.data(), buf.size()).is_ok());
    }
    (void)(*r)->metadata().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  EXPECT_GT(opened, 0);  // payload-only mutations still open
}

// ---- Hugging Face sharded layout --------------------------------------------------------------

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(SafetensorsIndex, ListsShardsAndTheirTensors) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  write_bytes(dir + "/m-1.safetensors", make_file(two_tensors(), std::string(12, 0)));
  nlohmann::json one = {{"c", {{"dtype", "U8"}, {"shape", {3}}, {"data_offsets", {0, 3}}}}};
  write_bytes(dir + "/m-2.safetensors", make_file(one, "abc"));
  nlohmann::json index = {
      {"metadata", {{"total_size", 15}}},
      {"weight_map", {{"a", "m-1.safetensors"}, {"b", "m-1.safetensors"}, {"c", "m-2.safetensors"}}}};
  ASSERT_TRUE(write_file_atomically(dir + "/model.safetensors.index.json", index.dump()).is_ok());
  auto r = open_safetensors_index(dir + "/model.safetensors.index.json");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->shards.size(), 2u);
  EXPECT_EQ(r->shards[0].file, "m-1.safetensors");
  EXPECT_EQ(r->shards[0].path, dir + "/m-1.safetensors");
  EXPECT_EQ(r->shards[0].tensors, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->shards[1].tensors, (std::vector<std::string>{"c"}));
  EXPECT_EQ(r->metadata["total_size"], 15);
}

TEST(SafetensorsIndex, RejectsNamesLeavingTheDirectory) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  for (const char* bad : {"/etc/passwd", "../m.safetensors", "a/../../m.safetensors", "", "a//b"}) {
    nlohmann::json index = {{"weight_map", {{"a", bad}}}};
    const std::string p = dir + "/i.json";
    ::unlink(p.c_str());
    ASSERT_TRUE(write_file_atomically(p, index.dump()).is_ok());
    auto r = open_safetensors_index(p);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
    EXPECT_NE(r.status().message().find("weight_map 'a'"), std::string::npos) << r.status().to_string();
  }
}

TEST(SafetensorsIndex, MappedTensorMissingFromItsFile) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  write_bytes(dir + "/m-1.safetensors", make_file(two_tensors(), std::string(12, 0)));
  nlohmann::json index = {{"weight_map", {{"a", "m-1.safetensors"}, {"zz", "m-1.safetensors"}}}};
  ASSERT_TRUE(write_file_atomically(dir + "/i.json", index.dump()).is_ok());
  auto r = open_safetensors_index(dir + "/i.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("tensor 'zz' in m-1.safetensors"), std::string::npos)
      << r.status().to_string();
}

TEST(SafetensorsIndex, WeightMapWrongType) {
  const testing::TempDir scratch;
  const std::string dir = scratch.path();
  ASSERT_TRUE(write_file_atomically(dir + "/i.json", R"({"weight_map": []})").is_ok());
  auto r = open_safetensors_index(dir + "/i.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("weight_map"), std::string::npos) << r.status().to_string();
}

// JSON found inside a string (our file metadata rides in __metadata__ as a string) is bounded too.
TEST(SafetensorsDefects, DeeplyNestedJsonInsideMetadataStringIsRefused) {
  nlohmann::json header = two_tensors();
  header["__metadata__"] = {{"ckptcheck_metadata", std::string(200000, '[') + std::string(200000, ']')}};
  expect_safetensors_error(make_file(header, std::string(12, '\x01')), StatusCode::kCorruption,
                           "nests deeper than 128");
}

}  // namespace
}  // namespace ckpt
