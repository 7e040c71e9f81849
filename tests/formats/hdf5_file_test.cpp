// Built only with HDF5 (CKPTCHECK_WITH_HDF5), like formats/hdf5_file.cpp.
#ifdef CKPTCHECK_WITH_HDF5
#include "formats/hdf5_file.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <random>
#include <thread>

#include "base/file_io.h"
#include "base/sha256.h"
#include "tests/support/byte_mutations.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A fresh directory, removed when the test program exits (ctest runs each test in its own process).
std::string temp_dir() {
  static std::deque<testing::TempDir> dirs;
  return dirs.emplace_back().path();
}

struct Sample {
  std::vector<float> w = std::vector<float>(12);
  std::vector<uint16_t> half = {0x3c00, 0xc000, 0x3800};          // 1, -2, 0.5
  std::vector<uint16_t> bf16 = {0x3f80, 0x4049, 0xbf00, 0x7f80};  // 1, 3.140625, -0.5, inf
  std::vector<uint8_t> mask = {1, 0, 1};
  std::vector<int64_t> steps = {7};
  Sample() {
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 1.0f;
  }
  std::vector<ChunkPayload> chunks() const {
    auto bytes = [](const auto& v) { return reinterpret_cast<const uint8_t*>(v.data()); };
    return {
        {{"model.layers.0.w", "model", DType::kF32, {4, 6}, {2, 0}, {2, 6}, 0, 48, ""}, bytes(w)},
        {{"model.half", "model", DType::kF16, {3}, {0}, {3}, 0, 6, ""}, bytes(half)},
        {{"optimizer.m/odd%name", "optimizer", DType::kBF16, {2, 2}, {0, 0}, {2, 2}, 0, 8, ""}, bytes(bf16)},
        {{"model.mask", "model", DType::kBool, {3}, {0}, {3}, 0, 3, ""}, mask.data()},
        {{"progress.step", "progress", DType::kI64, {}, {}, {}, 0, 8, ""}, bytes(steps)},
    };
  }
};

std::string write_sample(const std::string& dir, WrittenFile* out = nullptr) {
  Sample s;
  const std::string path = dir + "/shard.h5";
  auto w = write_hdf5_file(path, s.chunks(), {{"step", 12}, {"shard_index", 0}});
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  if (out && w.is_ok()) *out = *w;
  return path;
}

TEST(Hdf5File, RoundTripKeepsBytesHashesAndAttributes) {
  const std::string dir = temp_dir();
  WrittenFile written;
  const std::string path = write_sample(dir, &written);
  const std::vector<uint8_t> file = read_bytes(path);
  EXPECT_EQ(written.bytes, file.size());
  // The shard digest is the metadata prefix's: everything before the first payload.
  EXPECT_EQ(written.sha256_of, "header");
  uint64_t first = file.size();
  for (const auto& c : written.chunks) first = std::min(first, c.data_offset);
  EXPECT_EQ(written.sha256, sha256_hex(file.data(), first));

  auto r = open_hdf5(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->metadata()["step"], 12);
  const Sample s;
  ASSERT_EQ((*r)->chunks().size(), s.chunks().size());
  for (const auto& want : written.chunks) {
    size_t i = 0;
    while (i < (*r)->chunks().size() && (*r)->chunks()[i].name != want.name) ++i;
    ASSERT_LT(i, (*r)->chunks().size()) << want.name;
    const ChunkInfo& got = (*r)->chunks()[i];
    EXPECT_EQ(got.component, want.component);
    EXPECT_EQ(got.dtype, want.dtype);
    EXPECT_EQ(got.shape, want.shape);
    EXPECT_EQ(got.global_shape, want.global_shape);
    EXPECT_EQ(got.offsets, want.offsets);
    EXPECT_EQ(got.data_offset, want.data_offset);
    EXPECT_EQ(got.sha256, want.sha256);
    std::vector<uint8_t> bytes(got.data_bytes);
    ASSERT_TRUE((*r)->read_chunk(i, 0, bytes.data(), bytes.size()).is_ok());
    EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()), want.sha256) << want.name;
  }
  EXPECT_EQ(written.chunks[2].sha256, sha256_hex(s.bf16.data(), 8));
  EXPECT_FALSE(write_hdf5_file(path, s.chunks(), {}).is_ok());  // never overwrites
}

// The layout the stream phase relies on and the verifier checks: all metadata before the first
// payload, payloads of 4 KiB and more page-aligned, only zeros between and after payloads, and
// every chunk's sha256 attribute the real digest (no placeholder left behind), for thousands of
// tensors of every size including empty ones.
TEST(Hdf5File, ThousandsOfTensorsLayOutMetadataFirstAndPayloadsAligned) {
  const std::string dir = temp_dir();
  std::vector<std::vector<uint8_t>> data;
  std::vector<ChunkPayload> chunks;
  std::mt19937 rng(7);
  const size_t count = 3000;
  for (size_t i = 0; i < count; ++i) {
    const int64_t n = i % 500 == 0  ? 0
                      : i % 97 == 0 ? 4096 + static_cast<int64_t>(rng() % 9000)
                                    : rng() % 300;
    data.emplace_back(static_cast<size_t>(n) * 4);
    for (auto& b : data.back()) b = static_cast<uint8_t>(rng());
    chunks.push_back({{"layer." + std::to_string(i) + ".w",
                       i % 2 ? "model" : "optimizer",
                       DType::kF32,
                       {n},
                       {0},
                       {n},
                       0,
                       static_cast<uint64_t>(n) * 4,
                       ""},
                      data.back().data()});
  }
  const std::string path = dir + "/many.h5";
  auto w = write_hdf5_file(path, chunks, {{"step", 1}});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  const std::vector<uint8_t> file = read_bytes(path);
  std::vector<std::pair<uint64_t, uint64_t>> payloads;
  for (size_t i = 0; i < count; ++i) {
    const ChunkInfo& c = w->chunks[i];
    EXPECT_EQ(c.sha256, sha256_hex(data[i].data(), data[i].size())) << c.name;
    if (!c.data_bytes) continue;
    if (c.data_bytes >= 4096) {
      EXPECT_EQ(c.data_offset % 4096, 0u) << c.name;
    }
    payloads.push_back({c.data_offset, c.data_offset + c.data_bytes});
  }
  std::sort(payloads.begin(), payloads.end());
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(w->sha256, sha256_hex(file.data(), payloads[0].first));
  for (size_t p = 0; p < payloads.size(); ++p) {
    const uint64_t gap_end = p + 1 < payloads.size() ? payloads[p + 1].first : file.size();
    ASSERT_LE(payloads[p].second, gap_end);
    for (uint64_t b = payloads[p].second; b < gap_end; ++b) ASSERT_EQ(file[b], 0) << "@" << b;
  }
  const std::string text(file.begin(), file.end());
  EXPECT_EQ(text.find("ckptcheck:sha256:"), std::string::npos) << "a placeholder was left in the file";
  auto r = open_hdf5(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)->chunks().size(), count);
  for (const ChunkInfo& got : (*r)->chunks()) {
    const size_t i = std::stoul(got.name.substr(6));
    EXPECT_EQ(got.sha256, w->chunks[i].sha256) << got.name;
    EXPECT_EQ(got.data_bytes, w->chunks[i].data_bytes) << got.name;
    if (got.data_bytes) {
      EXPECT_EQ(got.data_offset, w->chunks[i].data_offset) << got.name;
    }
  }
}

TEST(Hdf5File, GroupNamesEscapeSlashAndPercent) {
  EXPECT_EQ(hdf5_group_name("optimizer.m/odd%name"), "optimizer.m%2Fodd%25name");
  EXPECT_EQ(hdf5_group_name(".."), "%2E%2E");
  EXPECT_EQ(hdf5_group_name("model.w"), "model.w");
}

bool have(const char* cmd) {
  return std::system((std::string(cmd) + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(Hdf5File, H5dumpReadsOurFile) {
  if (!have("test -x /usr/bin/h5dump")) GTEST_SKIP() << "h5dump not installed";
  const std::string path = write_sample(temp_dir());
  EXPECT_EQ(std::system(("/usr/bin/h5dump -H " + path + " >/dev/null").c_str()), 0);
}

TEST(Hdf5File, H5pyReadsValuesAndAttributes) {
  if (!have("/usr/bin/python3 -c 'import h5py, numpy'"))
    GTEST_SKIP() << "Debian python3 with h5py not installed";
  const std::string dir = temp_dir();
  const std::string path = write_sample(dir);
  const std::string script = dir + "/check.py";
  std::ofstream(script) << R"(import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert "step" in f.attrs["ckptcheck_metadata"].decode()
w = f["model.layers.0.w/2:4,0:6"]
assert w.attrs["name"].decode() == "model.layers.0.w", w.attrs["name"]
assert w.attrs["dtype"].decode() == "F32"
assert list(w.attrs["global_shape"]) == [4, 6] and list(w.attrs["offsets"]) == [2, 0]
assert np.array_equal(w[()], (np.arange(12, dtype=np.float32) * 0.25 - 1).reshape(2, 6))
h = f["model.half/all"][()]
assert h.dtype == np.float16 and list(h) == [1.0, -2.0, 0.5], h
b = f["optimizer.m%2Fodd%25name/all"]
assert b.attrs["dtype"].decode() == "BF16" and b.dtype == np.uint16
assert list(b[()].ravel()) == [0x3f80, 0x4049, 0xbf00, 0x7f80]
assert list(f["model.mask/all"][()]) == [1, 0, 1]
assert f["progress.step/all"][()] == 7
assert len(w.attrs["sha256"].decode()) == 64
print("ok")
)";
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script + " " + path).c_str()), 0);
}

// ---- defect files, one defect each, written through the HDF5 API ------------------------------

void expect_hdf5_error(const std::string& path, StatusCode code, const std::string& needle) {
  auto r = open_hdf5(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().to_string();
}

TEST(Hdf5Defects, NotAnHdf5File) {
  const std::string path = temp_dir() + "/x.h5";
  ASSERT_TRUE(write_file_atomically(path, "definitely not hdf5").is_ok());
  expect_hdf5_error(path, StatusCode::kCorruption, "cannot open");
}

TEST(Hdf5Defects, TruncatedFile) {
  const std::string dir = temp_dir();
  const std::string path = write_sample(dir);
  ASSERT_EQ(::truncate(path.c_str(), 1200), 0);
  auto r = open_hdf5(path);
  EXPECT_FALSE(r.is_ok());
}

// A file with one F32 dataset "/t/all" of 4 elements, optionally chunked+compressed, with the
// given attributes.
std::string handmade(const std::string& dir, bool chunked, bool with_name_attr, const char* dtype_attr) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string path = dir + "/hand.h5";
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "/t", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = 4;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    H5Pset_chunk(dcpl, 1, &n);
    H5Pset_deflate(dcpl, 4);
  }
  hid_t ds = H5Dcreate2(f, "/t/all", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  float v[4] = {1, 2, 3, 4};
  H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  auto str_attr = [&](const char* name, const std::string& value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, value.size());
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(ds, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, value.data());
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
  };
  auto dims_attr = [&](const char* name) {
    hsize_t one = 1;
    hid_t s = H5Screate_simple(1, &one, nullptr);
    hid_t a = H5Acreate2(ds, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    int64_t val = name[0] == 'g' ? 4 : 0;
    H5Awrite(a, H5T_NATIVE_INT64, &val);
    H5Aclose(a);
    H5Sclose(s);
  };
  if (with_name_attr) str_attr("name", "t");
  str_attr("component", "model");
  str_attr("dtype", dtype_attr);
  str_attr("sha256", "");
  dims_attr("global_shape");
  dims_attr("offsets");
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Gclose(g);
  H5Fclose(f);
  return path;
}

TEST(Hdf5Defects, HandmadeValidFileOpens) {
  auto r = open_hdf5(handmade(temp_dir(), false, true, "F32"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)->chunks().size(), 1u);
  float v[4];
  ASSERT_TRUE((*r)->read_chunk(0, 0, v, 16).is_ok());
  EXPECT_EQ(v[3], 4.0f);
}

TEST(Hdf5Defects, MissingAttribute) {
  expect_hdf5_error(handmade(temp_dir(), false, false, "F32"), StatusCode::kCorruption,
                    "missing attribute 'name'");
}

TEST(Hdf5Defects, DtypeAttributeContradictsType) {
  expect_hdf5_error(handmade(temp_dir(), false, true, "I32"), StatusCode::kCorruption,
                    "does not match dtype attribute I32");
}

TEST(Hdf5Defects, UnknownDtypeAttribute) {
  expect_hdf5_error(handmade(temp_dir(), false, true, "F8"), StatusCode::kNotSupported, "unknown dtype 'F8'");
}

TEST(Hdf5Defects, CompressedDataset) {
  expect_hdf5_error(handmade(temp_dir(), true, true, "F32"), StatusCode::kNotSupported,
                    "not a contiguous, unfiltered");
}

// ---- the parser child ---------------------------------------------------------------------------

// Sets an environment variable for one test (the parser child reads it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

constexpr const char* kFault = "CKPTCHECK_TEST_HDF5_CHILD_FAULT";

TEST(Hdf5Isolation, ACrashingParserIsCorruptionNamingTheFileAndTheParentCarriesOn) {
  const std::string path = write_sample(temp_dir());
  {
    ScopedEnv fault(kFault, "segv");
    auto r = open_hdf5(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_EQ(r.status().message().rfind(path + ": hdf5 parser child ", 0), 0u) << r.status().to_string();
    // AddressSanitizer catches the wild write itself and exits 1 instead.
    if (!built_with_address_sanitizer()) {
      EXPECT_EQ(r.status().message(), path + ": hdf5 parser child killed by SIGSEGV");
    }
  }
  auto again = open_hdf5(path);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->chunks().size(), Sample().chunks().size());
}

TEST(Hdf5Isolation, AHangingParserIsKilledAtItsDeadline) {
  const std::string path = write_sample(temp_dir());
  ScopedEnv fault(kFault, "hang");
  IsolationLimits limits;
  limits.wall_seconds = 1;
  auto r = open_hdf5(path, limits);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(), path + ": hdf5 parser child exceeded 1 s");
}

TEST(Hdf5Isolation, PayloadOffsetsOutsideTheFileReportedByTheChildAreRefused) {
  const std::string path = write_sample(temp_dir());
  ScopedEnv fault(kFault, "bad-offset");
  expect_hdf5_error(path, StatusCode::kCorruption, "is outside the file");
}

// The same through a real crafted file: the contiguous layout message's address moved past the end
// (libhdf5 opens such a dataset and reports the address; only reading it would fail).
TEST(Hdf5Isolation, ALayoutAddressPastTheEndOfTheFileIsRefused) {
  const std::string path = handmade(temp_dir(), false, true, "F32");
  std::vector<uint8_t> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto valid = open_hdf5(path);
  ASSERT_TRUE(valid.is_ok()) << valid.status().to_string();
  const uint64_t addr = (*valid)->chunks()[0].data_offset;
  // Layout message version 3, class 1 (contiguous), then address and size, 8 bytes each.
  std::vector<uint8_t> pattern = {3, 1};
  for (int i = 0; i < 8; ++i) pattern.push_back(static_cast<uint8_t>(addr >> (8 * i)));
  for (int i = 0; i < 8; ++i) pattern.push_back(i == 0 ? 16 : 0);
  auto at = std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end());
  ASSERT_NE(at, bytes.end());
  const uint64_t past = bytes.size() + 4096;
  for (int i = 0; i < 8; ++i) at[2 + i] = static_cast<uint8_t>(past >> (8 * i));
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  expect_hdf5_error(path, StatusCode::kCorruption,
                    "payload of 16 bytes at offset " + std::to_string(past) + " is outside the file (" +
                        std::to_string(bytes.size()) + " bytes)");
}

// A file h5py wrote in our layout (the attributes our writer sets) reads as libhdf5 itself reads it:
// same datasets, names, shapes and payload bytes, though the payloads now come from pread here.
TEST(Hdf5Isolation, AFileWrittenByH5pyReadsAsLibhdf5ReadsIt) {
  if (!have("/usr/bin/python3 -c 'import h5py, numpy'"))
    GTEST_SKIP() << "Debian python3 with h5py not installed";
  const std::string dir = temp_dir();
  const std::string path = dir + "/h5py.h5";
  const std::string script = dir + "/write.py";
  std::ofstream(script) << R"(import sys, hashlib, h5py, numpy as np
f = h5py.File(sys.argv[1], "w")
f.attrs["ckptcheck_metadata"] = np.bytes_(b'{"step": 3, "writer": "h5py"}')
def put(path, data, name, dtype, global_shape, offsets, component="model"):
    d = f.create_dataset(path, data=data)
    d.attrs["name"] = np.bytes_(name.encode())
    d.attrs["component"] = np.bytes_(component.encode())
    d.attrs["dtype"] = np.bytes_(dtype.encode())
    d.attrs["sha256"] = np.bytes_(hashlib.sha256(data.tobytes()).hexdigest().encode())
    d.attrs["global_shape"] = np.array(global_shape, dtype="<i8") if global_shape else h5py.Empty("<i8")
    d.attrs["offsets"] = np.array(offsets, dtype="<i8") if offsets else h5py.Empty("<i8")
put("model.w/all", (np.arange(24, dtype="<f4") * 0.5).reshape(4, 6), "model.w", "F32", [4, 6], [0, 0])
put("model.h/2:4,0:2", np.array([[1, -2], [0.5, 3]], dtype="<f2"), "model.h", "F16", [4, 2], [2, 0])
put("optimizer.m%2Fx/all", np.arange(5, dtype="<i8") - 2, "optimizer.m/x", "I64", [5], [0], "optimizer")
put("data.mask/all", np.array([1, 0, 255], dtype="u1"), "data.mask", "U8", [3], [0], "data")
put("progress.step/all", np.array(9, dtype="<i4"), "progress.step", "I32", [], [], "progress")
f.close()
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + path).c_str()), 0);
  auto r = open_hdf5(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->metadata()["writer"], "h5py");
  EXPECT_EQ((*r)->metadata()["step"], 3);
  struct Want {
    const char* dataset;
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Want> wants = {{"/model.w/all", "model.w", DType::kF32, {4, 6}},
                                   {"/model.h/2:4,0:2", "model.h", DType::kF16, {2, 2}},
                                   {"/optimizer.m%2Fx/all", "optimizer.m/x", DType::kI64, {5}},
                                   {"/data.mask/all", "data.mask", DType::kU8, {3}},
                                   {"/progress.step/all", "progress.step", DType::kI32, {}}};
  ASSERT_EQ((*r)->chunks().size(), wants.size());
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);  // trusted: the test wrote it
  ASSERT_GE(file, 0);
  for (const Want& want : wants) {
    size_t i = 0;
    while (i < (*r)->chunks().size() && (*r)->chunks()[i].name != want.name) ++i;
    ASSERT_LT(i, (*r)->chunks().size()) << want.name;
    const ChunkInfo& got = (*r)->chunks()[i];
    EXPECT_EQ(got.dtype, want.dtype) << want.name;
    EXPECT_EQ(got.shape, want.shape) << want.name;
    std::vector<uint8_t> ours(got.data_bytes);
    ASSERT_TRUE((*r)->read_chunk(i, 0, ours.data(), ours.size()).is_ok());
    EXPECT_EQ(sha256_hex(ours.data(), ours.size()), got.sha256) << want.name;
    hid_t ds = H5Dopen2(file, want.dataset, H5P_DEFAULT);
    ASSERT_GE(ds, 0) << want.dataset;
    hid_t type = H5Dget_type(ds);
    std::vector<uint8_t> theirs(static_cast<size_t>(H5Dget_storage_size(ds)));
    EXPECT_GE(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, theirs.data()), 0);
    EXPECT_EQ(ours, theirs) << want.name;
    H5Tclose(type);
    H5Dclose(ds);
  }
  H5Fclose(file);
  size_t w_index = 0;
  while (w_index < wants.size() && (*r)->chunks()[w_index].name != "model.w") ++w_index;
  ASSERT_LT(w_index, wants.size());
  float w[24];
  ASSERT_TRUE((*r)->read_chunk(w_index, 0, w, sizeof w).is_ok());
  EXPECT_EQ(w[23], 11.5f);
}

// Threads writing and reading HDF5 files at once: the reader forks only while no thread is inside
// libhdf5 (whose global lock a child would otherwise inherit held, and wait on until its deadline).
TEST(Hdf5Isolation, ReadsAndWritesFromSeveralThreadsAtOnce) {
  // See IsolatedCall.CallsFromSeveralThreadsEachGetTheirOwnOutput: ASan's allocator and fork.
  if (built_with_address_sanitizer()) GTEST_SKIP() << "fork from several threads under ASan can deadlock";
  const std::string dir = temp_dir();
  const std::string path = write_sample(dir);
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      Sample s;
      for (int i = 0; i < 20 && failures[t].empty(); ++i) {
        if (t % 2) {
          auto r = open_hdf5(path);
          if (!r.is_ok() || (*r)->chunks().size() != s.chunks().size()) failures[t] = r.status().to_string();
        } else {
          const std::string out = dir + "/w" + std::to_string(t) + "_" + std::to_string(i) + ".h5";
          auto w = write_hdf5_file(out, s.chunks(), {{"step", i}});
          if (!w.is_ok()) failures[t] = w.status().to_string();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<std::string>(4));
}

// Every byte of the file is fair game, metadata included: libhdf5 1.10.8 reads past its own heap
// buffers and requests terabytes on some of these (seen under ASan), but it does so in the parser
// child, so the test process must only ever see a Status.
TEST(Hdf5Fuzz, MutationsNeverCrash) {
  const std::string dir = temp_dir();
  WrittenFile written;
  const std::string path = write_sample(dir, &written);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> valid(std::istreambuf_iterator<char>(in), {});
  std::mt19937_64 rng(5150);
  // tmpfs when there is one: the loop rewrites the file thousands of times.
  const std::string mutant = (is_directory("/dev/shm") ? std::string("/dev/shm") : dir) + "/ckpt_h5_mutant_" +
                             std::to_string(::getpid()) + ".h5";
  IsolationLimits limits;
  limits.wall_seconds = 5;
  int opened = 0, child_failed = 0;
  // Each iteration forks, and forking an ASan process costs ~50 ms, so the sanitized run stops at
  // 1000 (~1 min). There, libhdf5's own bugs (a heap-use-after-free in H5O__msg_iterate_real under
  // H5Aexists, multi-TB allocations) end a child with an ASan report about once in 200 mutants.
  // Each iteration opens the file in a child process (~25 ms): 500 keep `make test` short.
  const int n = built_with_address_sanitizer() ? std::min(fuzz_iterations(500), 1000) : fuzz_iterations(500);
  for (int i = 0; i < n; ++i) {
    const auto bytes = mutate(valid, rng);
    std::ofstream(mutant, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto r = open_hdf5(mutant, limits);
    if (!r.is_ok()) {
      if (r.status().message().find("hdf5 parser child") != std::string::npos) ++child_failed;
      continue;
    }
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      std::vector<uint8_t> buf((*r)->chunks()[c].data_bytes);
      EXPECT_TRUE((*r)->read_chunk(c, 0, buf.data(), buf.size()).is_ok());
    }
  }
  ::unlink(mutant.c_str());
  EXPECT_GT(opened, 0);
  std::printf("hdf5 mutations: %d opened, %d ended the parser child\n", opened, child_failed);
}

}  // namespace
}  // namespace ckpt
#endif  // CKPTCHECK_WITH_HDF5
