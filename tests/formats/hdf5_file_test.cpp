// Built only with HDF5 (CKPTCHECK_WITH_HDF5), like formats/hdf5_file.cpp.
#ifdef CKPTCHECK_WITH_HDF5
#include "formats/hdf5_file.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "base/file_io.h"
#include "base/sha256.h"
#include "tests/support/byte_mutations.h"

namespace ckpt {
namespace {

std::string temp_dir() {
  std::string t = "/tmp/ckpt_h5_XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
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
  uint64_t size = 0;
  auto sha = sha256_hex_of_file(path, &size);
  ASSERT_TRUE(sha.is_ok());
  EXPECT_EQ(written.sha256, *sha);
  EXPECT_EQ(written.bytes, size);

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

void expect_error(const std::string& path, StatusCode code, const std::string& needle) {
  auto r = open_hdf5(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().to_string();
}

TEST(Hdf5Defects, NotAnHdf5File) {
  const std::string path = temp_dir() + "/x.h5";
  ASSERT_TRUE(write_file_atomically(path, "definitely not hdf5").is_ok());
  expect_error(path, StatusCode::kCorruption, "cannot open");
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
  expect_error(handmade(temp_dir(), false, false, "F32"), StatusCode::kCorruption,
               "missing attribute 'name'");
}

TEST(Hdf5Defects, DtypeAttributeContradictsType) {
  expect_error(handmade(temp_dir(), false, true, "I32"), StatusCode::kCorruption,
               "does not match dtype attribute I32");
}

TEST(Hdf5Defects, UnknownDtypeAttribute) {
  expect_error(handmade(temp_dir(), false, true, "F8"), StatusCode::kNotSupported, "unknown dtype 'F8'");
}

TEST(Hdf5Defects, CompressedDataset) {
  expect_error(handmade(temp_dir(), true, true, "F32"), StatusCode::kNotSupported,
               "not a contiguous, unfiltered");
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#else
constexpr bool kUnderAsan = false;
#endif

// libhdf5 1.10.8 is not a hardened parser: under ASan, mutated object-header/attribute messages
// make it read past its own heap buffers (H5O__msg_iterate_real via H5Aexists) and request
// multi-terabyte allocations (H5C_protect). Those bugs are inside the library, so the sanitized
// build mutates only what HDF5 does not parse (payload bytes) plus truncations; the plain build
// mutates everything.
std::vector<uint8_t> hdf5_mutant(const std::vector<uint8_t>& valid, const WrittenFile& w,
                                 std::mt19937_64& rng) {
  if (!kUnderAsan) return mutate(valid, rng);
  std::vector<uint8_t> out = valid;
  if (rng() % 2) {
    out.resize(rng() % out.size());
    return out;
  }
  const ChunkInfo& c = w.chunks[rng() % w.chunks.size()];
  for (uint64_t k = 0; k < c.data_bytes; ++k) {
    if (rng() % 4 == 0) out[c.data_offset + k] ^= static_cast<uint8_t>(rng());
  }
  return out;
}

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
  int opened = 0;
  for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
    const auto bytes = hdf5_mutant(valid, written, rng);
    std::ofstream(mutant, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto r = open_hdf5(mutant);
    if (!r.is_ok()) continue;
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      std::vector<uint8_t> buf((*r)->chunks()[c].data_bytes);
      EXPECT_TRUE((*r)->read_chunk(c, 0, buf.data(), buf.size()).is_ok());
    }
  }
  ::unlink(mutant.c_str());
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace ckpt
#endif  // CKPTCHECK_WITH_HDF5
